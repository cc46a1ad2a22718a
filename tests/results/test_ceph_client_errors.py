"""A Job whose Ceph client cannot parse the cluster's keys says why and what to do."""

from __future__ import annotations

import base64
import re
from pathlib import Path

from crimsonbench.results.ceph_client_errors import explain_ceph_client_error, key_type

# pacific's `ceph` given a key made by Ceph 20.2.4 (tests/fixtures/ceph/capture_key_type.sh)
LOG = (Path(__file__).resolve().parents[1] / "fixtures" / "ceph" / "aes256k-key-16.2.15.txt"
       ).read_text()  # fmt: skip


def test_an_aes256k_key_in_an_older_client_names_the_fix() -> None:
    hint = explain_ceph_client_error(LOG)
    assert "client.admin's cephx key" in hint and "aes256k key (type 2" in hint, hint
    assert "fio.image" in hint


def test_other_failures_get_no_hint() -> None:
    key = re.search(r"val=(\S+): Malformed", LOG).group(1)  # type: ignore[union-attr]
    assert key_type(key) == 2
    aes = base64.b64encode(b"\x01" + base64.b64decode(key)[1:]).decode()
    assert key_type(aes) == 1
    assert explain_ceph_client_error(LOG.replace(key, aes)) == ""  # not a key-type problem
    assert explain_ceph_client_error("[errno 2] RADOS object not found") == ""
    assert explain_ceph_client_error(LOG.replace(key, "not base64!")) == ""
