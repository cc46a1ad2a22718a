"""What local mode asks this machine's Ceph before any daemon runs: its version and the
option names its programs know (crimson's option names come from those, not a table)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crimsonbench.errors import InvalidSpec
from crimsonbench.local.runner import LocalRun
from crimsonbench.local.versions import installed_ceph_version, known_options
from crimsonbench.progress import QuietEvents
from crimsonbench.spec.models import validate_spec

pytestmark = pytest.mark.ceph


def test_the_programs_say_which_options_they_know() -> None:
    known = known_options()
    assert known is not None
    # options every Ceph since luminous has, and one pacific does not
    assert {"osd_op_num_shards", "ms_type", "bluestore_cache_size"} <= known
    assert "crimson_cpu_set" not in known
    assert installed_ceph_version().split(".")[0].isdigit()


def test_a_crimson_plan_on_a_ceph_without_crimson_options_names_the_field(tmp_path: Path) -> None:
    """This machine's Ceph (pacific) knows no crimson CPU-set option: planning a crimson
    run against it fails before any daemon, naming spec.osd.flavor."""
    spec = validate_spec({"target": {"local": {}}, "osd": {"flavor": "crimson",
                                                           "objectStore": "cyanstore"},
                          "client": {"cpuSet": "1"}})  # fmt: skip
    with pytest.raises(InvalidSpec) as err:
        LocalRun("v", spec, tmp_path, QuietEvents()).plan()
    assert err.value.field == "spec.osd.flavor"
    assert "crimson_seastar_cpu_cores" in str(err.value)
