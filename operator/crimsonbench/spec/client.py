"""The fio clients: where they run, their CPUs, the pool and images they drive."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from crimsonbench.spec.base import (
    DNS_SUBDOMAIN_PATTERN,
    LABEL_KEY_PATTERN,
    STEP_JOBS_NOTE,
    BlockSizeStr,
    CephxUser,
    CpuSetStr,
    LabelValue,
    NodeName,
    NodeNames,
    RuledModel,
    SizeStr,
)
from crimsonbench.spec.rules import Rule, map_keys_rule

CLIENT_RULES = (
    Rule(
        cel="[has(self.node), has(self.nodes) && self.nodes.size() > 0, "
        "has(self.nodeSelector) && self.nodeSelector.size() > 0].filter(x, x).size() <= 1",
        message="name the client nodes one way: node, nodes or nodeSelector",
        field="nodes",
        check=lambda c: sum((c.node is not None, bool(c.nodes), bool(c.node_selector))) <= 1,
    ),
    Rule(
        cel="!has(self.count) || (!has(self.node) && (!has(self.nodes) || self.nodes.size() == 0))",
        message="count is for nodeSelector (how many matching nodes) or local runs (fio "
        "clients on this machine); with node or nodes there is one client per node",
        field="count",
        check=lambda c: c.count is None or (c.node is None and not c.nodes),
    ),
)

# Map keys: the structural schema cannot constrain them, so CEL does (and Python the same).
CLIENT_KEY_RULES = (
    map_keys_rule(
        "nodeSelector",
        "node_selector",
        316,
        LABEL_KEY_PATTERN,
        "nodeSelector keys must be label keys: [prefix/]name, the name at most 63 "
        "letters, digits, '-', '_' and '.', starting and ending with a letter or digit, the "
        "prefix a DNS subdomain (e.g. node-role.kubernetes.io/fio)",
    ),
    map_keys_rule(
        "nodeCpuSets",
        "node_cpu_sets",
        253,
        DNS_SUBDOMAIN_PATTERN,
        "nodeCpuSets keys must be node names: lower case letters, digits, '-' and "
        "'.', starting and ending with a letter or digit, at most 253 characters",
    ),
)


def _no_default(schema: dict[str, Any]) -> None:
    """A field's JSON schema without its default (pydantic's json_schema_extra hook)."""
    schema.pop("default", None)


class ClientSpec(RuledModel):
    RULES = CLIENT_RULES + CLIENT_KEY_RULES

    cpu_set: CpuSetStr | None = Field(
        default=None,
        description="CPUs reserved for fio on every client (local: shared equally by count "
        "clients); must not overlap osd.cpuSet. Default: the CPUs the OSDs do not use.",
    )
    pool: str = Field(
        default="rbd",
        pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$",
        description="The benchmark pool: letters, digits, '_', '.' and '-', not starting "
        "with '.' or '-'. External targets: a pool that exists, named explicitly (no default: "
        "an existing cluster's `rbd` is someone's data). Rook: the run creates its own, named "
        "<pool>-<the run's uid tag>. Local: default rbd.",
        # not in the CRD: the API server must not fill `rbd` in for an external target
        json_schema_extra=_no_default,
    )
    pg_num: int = Field(default=128, ge=1, le=65536)
    images: int = Field(
        default=32,
        ge=1,
        le=1024,
        description="Number of RBD images" + STEP_JOBS_NOTE,
    )
    image_size: SizeStr = Field(
        default="2Gi", description="Size of each RBD image (below 1000Ti), e.g. 2Gi."
    )
    processes_per_image: int = Field(
        default=1,
        ge=1,
        le=64,
        description="fio processes (job files) per image and step" + STEP_JOBS_NOTE,
    )
    num_jobs: int = Field(default=1, ge=1, le=64, description="fio numjobs per process.")
    prefill: bool = Field(default=True, description="Write every image once, 64K sequential.")
    prefill_block_size: BlockSizeStr = Field(default="64k")
    user: CephxUser = Field(
        default="admin",
        description="cephx user fio runs as, without 'client.' (letters, digits, '_', '.', "
        "'-'). On Rook the run makes its own (<name>-fio) and this is not used.",
    )
    image_prefix: str = Field(default="fio_test_", pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,47}$")
    node: NodeName | None = Field(default=None, description="The node fio runs on (operator).")
    nodes: NodeNames = Field(
        default_factory=list,
        description="Client nodes (operator): one fio client on each, started together; "
        "the images are spread over them.",
    )
    node_selector: dict[str, LabelValue] = Field(
        default_factory=dict,
        max_length=16,
        description="Client nodes by label (operator): the first `count` matching nodes by "
        "name (default: all of them).",
    )
    count: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="Number of fio clients: with nodeSelector, how many nodes; in local "
        "runs, fio clients on this machine, each on its own share of cpuSet.",
    )
    node_cpu_sets: dict[str, CpuSetStr] = Field(
        default_factory=dict,
        max_length=1024,
        description="Client CPUs per node name, overriding cpuSet on that node.",
    )

    @property
    def named_nodes(self) -> tuple[str, ...]:
        """The client nodes the spec names (node or nodes); () for a selector or local."""
        return (self.node,) if self.node is not None else tuple(self.nodes)
