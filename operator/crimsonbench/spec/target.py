"""Where a run goes: a throwaway local cluster, a Rook cluster, or an existing one."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from crimsonbench.spec.base import (
    DNS_LABEL_PATTERN,
    MON_HOST_PATTERN,
    SECRET_KEY_PATTERN,
    CephxUser,
    NodeNames,
    ObjectName,
    PathStr,
    RuledModel,
    SizeStr,
    SpecModel,
)
from crimsonbench.spec.rules import Rule


class SecretKeyRef(SpecModel):
    name: ObjectName = Field(description="Secret in the BenchmarkRun's namespace.")
    key: str = Field(
        default="keyring",
        min_length=1,
        max_length=253,
        pattern=SECRET_KEY_PATTERN,
        description="Key holding the keyring.",
    )


LOCAL_RULES = (
    Rule(
        cel="!has(self.cephRoot) || !has(self.cephBinDir)",
        message="take the programs from one place: cephRoot (a root filesystem) or "
        "cephBinDir (a build's bin directory), not both",
        field="cephBinDir",
        check=lambda t: t.ceph_root is None or t.ceph_bin_dir is None,
    ),
)


class LocalTarget(RuledModel):
    """A throwaway single-node cluster started from the installed Ceph packages (or a
    Ceph root filesystem, or a Ceph build's bin directory)."""

    RULES = LOCAL_RULES

    work_dir: PathStr | None = Field(
        default=None, description="Cluster and results directory; default: a fresh one."
    )
    bluestore_backing: Literal["file", "loop"] = Field(
        default="file",
        description="Classic bluestore on a plain file or on a loop device.",
    )
    bluestore_size: SizeStr = Field(
        default="8Gi",
        description="Store size per OSD: the bluestore block, the seastore device (written "
        "in full at mkfs; at least 4Gi), the memstore/cyanstore capacity.",
    )
    force_ssd: bool = Field(
        default=True, description="Apply SSD tunables even if the disk reports rotational."
    )
    crimson_binary: PathStr | None = Field(
        default=None,
        description="Path of crimson-osd (inside cephRoot when set); default: search PATH.",
    )
    ceph_root: PathStr | None = Field(
        default=None,
        description="A Ceph root filesystem to run every Ceph and fio program from (chroot, "
        "as root), e.g. the crimson one e2e/crimson/build-ceph-root.sh builds; default: "
        "this machine's packages.",
    )
    ceph_bin_dir: PathStr | None = Field(
        default=None,
        description="A Ceph build's bin directory (vstart.sh's build/bin, libraries from "
        "build/lib): its programs first, the rest from this machine.",
    )
    keep_cluster: bool = Field(default=False, description="Leave the cluster running afterwards.")


class RookTarget(SpecModel):
    cluster_name: ObjectName = Field(description="Name of the Rook CephCluster.")
    namespace: str = Field(
        default="rook-ceph",
        min_length=1,
        max_length=63,
        pattern=DNS_LABEL_PATTERN,
        description="Namespace of the CephCluster.",
    )
    osd_nodes: NodeNames = Field(
        default_factory=list,
        description="Nodes whose OSDs are planned and pinned, each from its own CPU "
        "topology; default: every node running an OSD of the cluster. OSDs never move.",
    )
    osd_ids: list[Annotated[int, Field(ge=0, le=1_000_000)]] = Field(
        default_factory=list,
        max_length=4096,
        json_schema_extra={"x-kubernetes-list-type": "set"},
        description="Only these OSDs are planned and pinned; default: every OSD on osdNodes.",
    )
    allow_reprovision: bool = Field(
        default=False,
        description="Allow purging and re-creating crimson OSDs when the reactor layout changes.",
    )


EXTERNAL_RULES = (
    Rule(
        cel="has(self.keyringSecret) || has(self.keyringFile)",
        message="set keyringSecret (operator) or keyringFile (local CLI) to reach the cluster",
        field="keyringSecret",
        check=lambda s: s.keyring_secret is not None or s.keyring_file is not None,
    ),
)


class ExternalTarget(RuledModel):
    """An existing cluster (cephadm, Proxmox, ...) reached through its monitors."""

    RULES = EXTERNAL_RULES

    mon_host: str = Field(
        min_length=1,
        max_length=1024,
        pattern=MON_HOST_PATTERN,
        description="mon_host as in ceph.conf: addresses and names separated by ',' or ' ' "
        "(e.g. [v2:10.0.0.1:3300,v1:10.0.0.1:6789]).",
    )
    user: CephxUser = Field(
        description="cephx user of the keyring, without 'client.' (no default: name the user "
        "the keyring holds; a run needs to create and remove images in client.pool, not "
        "client.admin's powers)"
    )
    keyring_secret: SecretKeyRef | None = Field(default=None, description="For the operator.")
    keyring_file: PathStr | None = Field(default=None, description="For the local CLI.")


TARGET_RULES = (
    Rule(
        cel="[has(self.local), has(self.rook), has(self.external)].filter(x, x).size() == 1",
        message="set exactly one of local, rook or external",
        field="",
        check=lambda t: sum(x is not None for x in (t.local, t.rook, t.external)) == 1,
    ),
)


class TargetSpec(RuledModel):
    RULES = TARGET_RULES
    local: LocalTarget | None = None
    rook: RookTarget | None = None
    external: ExternalTarget | None = None

    @property
    def kind(self) -> str:
        return "local" if self.local else "rook" if self.rook else "external"
