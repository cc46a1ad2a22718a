# The two commands of the README. Both install what they need first.
.PHONY: demo test lint manifests

demo:  ## run the quick example against a throwaway local Ceph cluster
	./scripts/setup.sh
	.venv/bin/crimsonbench run operator/crimsonbench/examples/quick.yaml --fresh

test:  ## the whole test suite: static checks, unit, property and real-Ceph tests
	./scripts/setup.sh
	./scripts/test.sh

manifests:  ## regenerate files derived from others (CRD, chart RBAC, plain manifests)
	.venv/bin/python -m crimsonbench.spec.crd > crds/benchmarkrun.yaml
	e2e/render-manifests.sh
