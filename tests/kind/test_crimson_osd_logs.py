"""How a crimson OSD's log tells a stop that finished from one that did not, on the real
logs of the cyanstore stack whose PG 1.0 was lost (make test, 2026-11-26): osd.1's first
crimson-osd logged `crimson shutting down` and `OSD::stop` at Rook's restart and was gone
7 s later without `osd - stop`, and its store never held PG 1.0 again. osd.0 stopped
twice, each to the end. (Quick tier: the logs are fixtures; the crimson stores' kind test
reads them live.)"""

from __future__ import annotations

import gzip
from pathlib import Path

from crimson_osds import unfinished_stops

LOGS = Path(__file__).resolve().parents[1] / "fixtures" / "crimson"


def log(name: str) -> str:
    return gzip.decompress((LOGS / name).read_bytes()).decode()


def test_a_stop_that_never_finished_is_found() -> None:
    text = log("rook-kind-cyanstore-ceph-osd.1-unfinished-stop.log.gz")
    assert text.count("crimson shutting down") == 4  # the last three stops finished
    assert unfinished_stops(text) == ["2026-11-26 11:50:15,651"]


def test_stops_that_finished_and_the_mkfs_run_are_not_counted() -> None:
    text = log("rook-kind-cyanstore-ceph-osd.0-clean-stops.log.gz")
    assert text.count("crimson shutting down") == 2 and "OSD::mkfs" in text
    assert unfinished_stops(text) == []
