"""Object names and labels every manifest shares."""

from __future__ import annotations

import hashlib
import re

from crimsonbench.spec.api import GROUP

APP = "crimsonbench"

LABEL_NAME = "app.kubernetes.io/name"
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_RUN = f"{GROUP}/run"
LABEL_STEP = f"{GROUP}/step"
LABEL_ROLE = f"{GROUP}/role"
LABEL_NODE = f"{GROUP}/node"

MAX_NAME = 63  # DNS-1123 label; also the limit of a label value
# A Job's pods are named by the API server from generateName "<job>-": that base is cut to
# 58 characters before 5 random ones are added, so only a Job name of at most 57 keeps its
# end in its pods' names (suffixed_name).
JOB_NAME_KEPT_IN_PODS = 57
_HASH_LEN = 8
_INVALID = re.compile(r"[^a-z0-9-]+")
_INVALID_VALUE = re.compile(r"[^A-Za-z0-9._-]+")


def dns_name(*parts: str, max_len: int = MAX_NAME) -> str:
    """A DNS-1123 label made of the parts joined by '-': lower case, [a-z0-9-], starting
    and ending alphanumeric, at most max_len characters. When the parts do not fit (or had
    to be changed) a short hash of the original parts keeps different inputs apart."""
    if max_len <= _HASH_LEN + 1:
        raise ValueError(f"max_len {max_len} leaves no room for a name and its hash")
    joined = "-".join(p for p in parts if p)
    name = _INVALID.sub("-", joined.lower()).strip("-")
    name = re.sub(r"-{2,}", "-", name)
    if name == joined and 0 < len(name) <= max_len:
        return name
    # also when only the case changed: "Run" and "run" must not become the same name
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:_HASH_LEN]
    head = name[: max_len - _HASH_LEN - 1].rstrip("-")
    return f"{head}-{digest}" if head else f"x-{digest}"


def suffixed_name(head: str, suffix: str, max_len: int = JOB_NAME_KEPT_IN_PODS) -> str:
    """`head-suffix` in at most max_len characters with the suffix always whole at the end:
    a head too long is shortened with a hash (dns_name). Names that fit are
    dns_name(head, suffix) exactly, so existing objects keep their names. Why: the
    operator's admission policy recognises the pods it may exec into by their name's end
    (templates/reachpolicy.yaml), which the plain hashing of dns_name would cut."""
    return f"{dns_name(head, max_len=max_len - len(suffix) - 1)}-{suffix}"


OWNER_LEN = 12  # hex characters of a run's uid in what it creates


def owner_tag(uid: str) -> str:
    """What a run puts in the names of what it creates (pool, images, cephx user, Jobs):
    from its uid, so two runs of one name (in two namespaces, or one deleted and made
    again) never name the same thing, and nothing found under such a name is someone
    else's to adopt."""
    tag = re.sub(r"[^0-9a-f]", "", uid.lower())[:OWNER_LEN]
    if len(tag) < OWNER_LEN:
        tag = hashlib.sha256(uid.encode()).hexdigest()[:OWNER_LEN]
    return tag


def child_name(run: str, uid: str) -> str:
    """The run's name for what it creates: <run>-<owner tag> (DNS-1123)."""
    return dns_name(run, owner_tag(uid), max_len=MAX_NAME - 16)  # room for a role suffix


def label_value(value: str) -> str:
    """A valid label value (<= 63, [A-Za-z0-9._-], alphanumeric at both ends); values that
    are already valid stay as they are, others get a short hash."""
    if (
        len(value) <= MAX_NAME
        and not _INVALID_VALUE.search(value)
        and (value == "" or (value[0].isalnum() and value[-1].isalnum()))
    ):
        return value
    cleaned = _INVALID_VALUE.sub("-", value).strip("-._")
    digest = hashlib.sha256(value.encode()).hexdigest()[:_HASH_LEN]
    head = cleaned[: MAX_NAME - _HASH_LEN - 1].rstrip("-._")
    return f"{head}-{digest}" if head else digest


def labels(run: str, role: str, step: str | None = None, node: str | None = None) -> dict[str, str]:
    out = {
        LABEL_NAME: APP,
        LABEL_MANAGED_BY: "crimsonbench-operator",
        LABEL_RUN: label_value(run),
        LABEL_ROLE: role,
    }
    if step is not None:
        out[LABEL_STEP] = label_value(step)
    if node is not None:
        out[LABEL_NODE] = label_value(node)
    return out


def metadata(
    name: str, namespace: str | None, labels_: dict[str, str], annotations: dict[str, str] | None
) -> dict[str, object]:
    meta: dict[str, object] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta["labels"] = labels_
    if annotations:
        meta["annotations"] = annotations
    return meta
