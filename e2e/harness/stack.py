"""The real-node e2e stack in one context manager, for the tests and the benchmark:
a real control plane, a real kubelet with containerd running our images (built from
./Dockerfile without a registry), the operator installed from our Helm chart as a
Deployment, and a real local Ceph cluster (local mode's code) as an external target.

    with e2e_stack() as s:   # raises StackUnavailable(reason) where the machine cannot
        s.custom.create_namespaced_custom_object(...)
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from kubernetes.client import V1ObjectMeta, V1Secret

from crimsonbench.local.cluster import LocalCluster
from crimsonbench.plan.types import OsdCpus
from crimsonbench.spec.models import Flavor, LocalTarget, ObjectStore, OsdSpec
from harness.controlplane import ControlPlane
from harness.node import Node, host_state, node_parts
from harness.operator_install import RUN_NS, OperatorOnNode, StackUnavailable

__all__ = ["KEYRING_SECRET", "POOL", "RUN_NS", "Stack", "StackUnavailable", "e2e_stack"]

POOL = "rbd"
KEYRING_SECRET = "ceph-keyring"


def prerequisites() -> str:
    """'' when the machine can run the stack, else why not."""
    if os.geteuid() != 0:
        return "not root: a kubelet and containerd need root"
    missing = [b for b in ("containerd", "ctr", "runc", "go") if shutil.which(b) is None]
    if missing:
        return f"{', '.join(missing)} not installed (scripts/setup.sh installs them)"
    if any(shutil.which(b) is None for b in ("ceph-mon", "ceph-osd", "ceph-mgr", "rbd")):
        return "Ceph packages not installed"
    if len(os.sched_getaffinity(0)) < 2:
        return "needs 2 CPUs: one for the OSD, one for fio"
    return ""


@dataclass
class Stack:
    """The node, our operator on it (its API clients: op.core, op.batch, op.custom) and the
    external Ceph cluster its runs target."""

    op: OperatorOnNode
    ceph: LocalCluster
    timings: dict[str, float] = field(default_factory=dict)


@contextlib.contextmanager
def e2e_stack(osd_cpu: int = 0) -> Iterator[Stack]:
    """Everything up and the operator Ready; on exit everything down and the host as it
    was (AssertionError otherwise). Raises StackUnavailable where the machine cannot."""
    reason = prerequisites()
    if reason:
        raise StackUnavailable(reason)
    t0 = time.monotonic()
    bin_dir, archives = node_parts(StackUnavailable, product_images=True)
    timings = {"binaries_and_images_s": time.monotonic() - t0}
    before = host_state()
    osd = OsdSpec(flavor=Flavor.CLASSIC, object_store=ObjectStore.MEMSTORE, count=1)
    t1 = time.monotonic()
    with (
        ControlPlane(bin_dir=bin_dir, scheduler=True) as cp,
        Node(cp, images=archives) as node,
        LocalCluster(LocalTarget(), osd, [OsdCpus(osd_id=0, reactors=(osd_cpu,))]) as ceph,
        contextlib.ExitStack() as stack,
    ):
        ceph.create_pool(POOL, 8)
        # the runs' namespace holds the external cluster's keyring, as a user would create it
        op = OperatorOnNode(cp, node, external_namespaces=(RUN_NS,), import_images=False,
                            ready_timeout=180)  # fmt: skip
        op.start()
        stack.callback(op.api.close)
        keyring = ceph.client_conf().keyring.read_text()
        secret = V1Secret(
            metadata=V1ObjectMeta(name=KEYRING_SECRET), string_data={"keyring": keyring}
        )
        op.core.create_namespaced_secret(RUN_NS, secret)
        timings["stack_up_s"] = time.monotonic() - t1
        timings.update({f"node_{k}_s": v for k, v in node.timings.items()})
        yield Stack(op, ceph, timings)
    # as the node saw it before releasing the machine's node lock (the next stack may start)
    after = node.final_host if node.final_host is not None else host_state()
    assert after == before, f"host not restored: before {before}, after {after}"
