"""RookCluster's teardown steps: Rook's objects (dependents first), its operator, the
namespace, the loop devices, the NAT rule and what Rook put on the host."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from typing import Any

import kubernetes.client

from harness.controlplane import NotReadyError
from harness.rook_ops import GROUP, PLURAL, VERSION, RookOps
from harness.waiting import wait_for


class RookTeardown(RookOps):
    """Mixed into RookCluster (which defines these attributes)."""

    loops: list[str]
    teardown_problems: list[str]
    _nat: list[str]
    _made_run_udev: bool

    # ------------------------------------------------------------------ teardown steps

    def _rook_objects(self) -> list[tuple[str, str]]:
        """(plural, name) of every ceph.rook.io object in the namespace, CephCluster last."""
        found = []
        resources: Any = self.custom.get_api_resources(GROUP, VERSION)
        for r in resources.resources:
            if "/" in r.name or not r.namespaced or "delete" not in (r.verbs or []):
                continue
            items: Any = self.custom.list_namespaced_custom_object(
                GROUP, VERSION, self.namespace, r.name)  # fmt: skip
            found += [(r.name, o["metadata"]["name"]) for o in items["items"]]
        return sorted(found, key=lambda o: o[0] == PLURAL)

    def _delete_custom(self, plural: str, name: str) -> None:
        with contextlib.suppress(kubernetes.client.ApiException):  # 404: gone already
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace, plural, name)  # fmt: skip

    def _strip_finalizers(self, everything: bool = True) -> list[str]:
        """Drop the finalizers of Rook's CRs but the CephCluster (everything=False), or of
        all Rook put in the namespace (its CRs, and the ceph.rook.io/disaster-protection
        ones on the mon Secret and ConfigMap); returns what had them."""
        stripped = []
        with self.cp.admin_api_client() as api:
            api.set_default_header("Content-Type", "application/merge-patch+json")
            custom, core = kubernetes.client.CustomObjectsApi(api), kubernetes.client.CoreV1Api(api)
            unset = {"metadata": {"finalizers": None}}
            for plural, name in self._rook_objects():
                if everything or plural != PLURAL:
                    custom.patch_namespaced_custom_object(
                        GROUP, VERSION, self.namespace, plural, name, unset)  # fmt: skip
                    stripped.append(f"{plural}/{name}")
            listed: list[tuple[str, Any, Any]] = [
                ("configmap", core.list_namespaced_config_map, core.patch_namespaced_config_map),
                ("secret", core.list_namespaced_secret, core.patch_namespaced_secret),
            ]
            for kind, lister, patcher in listed if everything else []:
                for obj in lister(self.namespace).items:
                    if obj.metadata.finalizers:
                        patcher(obj.metadata.name, self.namespace, unset)
                        stripped.append(f"{kind}/{obj.metadata.name}")
        return stripped

    def _delete_rook_objects(self) -> None:
        """Rook keeps a CephCluster that has dependents (CephBlockPool, CephClient, ...),
        and a CephBlockPool that holds RBD images: the dependents are deleted with their
        finalizers dropped (the whole cluster goes anyway), then the CephCluster, whose
        deletion the operator must finish (else its finalizers are dropped, and reported)."""
        dependents = [o for o in self._rook_objects() if o[0] != PLURAL]
        for plural, name in dependents:
            self._delete_custom(plural, name)
        if dependents:
            self._strip_finalizers(everything=False)
        with contextlib.suppress(kubernetes.client.ApiException):  # 404: gone already
            self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, self.name)  # fmt: skip
        try:
            wait_for(lambda: not self._rook_objects(), 300, "Rook's objects deleted",
                     self.diagnostics)  # fmt: skip
        except NotReadyError as exc:
            stripped = self._strip_finalizers()
            self.teardown_problems.append(f"{str(exc)[:3000]}\n(finalizers dropped: {stripped})")

    def _uninstall_operator(self) -> None:
        if self._helm_env:
            self.helm("uninstall", "rook-ceph", "--namespace", self.namespace, "--wait",
                      "--timeout", "5m")  # fmt: skip

    def _delete_namespace(self) -> None:
        with contextlib.suppress(kubernetes.client.ApiException):  # 404: gone already
            self.core.delete_namespace(self.namespace)

        def gone() -> bool:
            try:
                self.core.read_namespace(self.namespace)
            except kubernetes.client.ApiException as exc:
                return exc.status == 404
            return False

        # the pods go first: the OSDs hold the loop devices open until their containers end
        try:
            wait_for(gone, 300, f"namespace {self.namespace} deleted", self.diagnostics)
        except NotReadyError as exc:
            stripped = self._strip_finalizers()
            self.teardown_problems.append(f"{str(exc)[:3000]}\n(finalizers dropped: {stripped})")
            wait_for(gone, 120, f"namespace {self.namespace} deleted", self.diagnostics)

    def _release_loops(self) -> None:
        for loop in self.loops:
            subprocess.run(["wipefs", "--all", "--force", loop], capture_output=True,
                           check=False, timeout=60)  # fmt: skip
            subprocess.run(["losetup", "--detach", loop], capture_output=True, check=True,
                           timeout=60)  # fmt: skip
        self.loops.clear()

    def _remove_nat(self) -> None:
        if self._nat:
            subprocess.run(["iptables", "-t", "nat", "-D", *self._nat], check=True, timeout=60)
            self._nat = []

    def _restore_host(self) -> None:
        if self._made_run_udev:
            shutil.rmtree("/run/udev", ignore_errors=True)
            self._made_run_udev = False
