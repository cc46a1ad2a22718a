"""Kubernetes manifests as plain dicts: pure builders, no I/O, no kubernetes/kopf imports.

    cephcluster  the CephCluster spec a run needs, JSON merge patches to apply and undo it
    jobs         probe, prefill and fio Jobs, their job-file ConfigMaps, CephClient/Pool
    results      step results split over ConfigMaps, and the .status summary
    rbac         the operator's least-privilege RBAC (`python -m crimsonbench.manifests.rbac`)

The operator (crimsonbench.controller) sends these to the API server; tests compare them
with golden YAML files.
"""
