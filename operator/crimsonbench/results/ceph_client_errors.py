"""Ceph client failures a run's Jobs meet, turned into what to do about them. Pure: the
input is a Job's log (what the Ceph CLI or librbd printed), the output a sentence or ''."""

from __future__ import annotations

import base64
import binascii
import re

# How a Ceph client says it cannot parse a key in its keyring (captured from pacific's
# `ceph` given a 20.2.4 key: tests/fixtures/ceph/capture_key_type.sh).
_UNPARSABLE_KEY = re.compile(
    r"error setting modifier for \[(?P<who>[^\]]+)\] type=key val=(?P<key>[A-Za-z0-9+/=]+): "
    r"Malformed input"
)
# CryptoKey's encoding starts with its type: 1 AES (every release), 2 AES-256-Krb5 ("aes256k",
# made by default from Ceph 20.2; older clients know no such type).
_AES = 1


def key_type(key: str) -> int | None:
    """The cephx key's crypto type (its first encoded byte), None when it is not base64."""
    try:
        raw = base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw[0] if raw else None


def explain_ceph_client_error(log: str) -> str:
    """A fix for a known client failure in LOG, or ''."""
    m = _UNPARSABLE_KEY.search(log)
    if m is None:
        return ""
    kind = key_type(m.group("key"))
    if kind is None or kind <= _AES:
        return ""
    return (
        f"the Ceph client in the fio image cannot read {m.group('who')}'s cephx key: the "
        f"cluster made it an aes256k key (type {kind}; Ceph 20.2 and newer do by default) and "
        "older clients cannot parse those. Run a fio image whose Ceph client is as new as the "
        "cluster (chart value fio.image; e2e/rook/build-crimson-image.sh builds one on "
        "Ceph 20.2.4)"
    )
