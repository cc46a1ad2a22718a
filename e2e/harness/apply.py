"""Server-side apply of YAML (a file, text, or parsed documents) with kubernetes.dynamic."""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import kubernetes.client
import kubernetes.dynamic
import kubernetes.dynamic.exceptions
import yaml

FIELD_MANAGER = "crimsonbench-e2e"


def server_side_apply(
    client: kubernetes.client.ApiClient,
    source: str | Path | Iterable[Mapping[str, Any]],
    namespace: str | None = None,
    timeout: float = 30.0,
    warnings: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Server-side apply every document of a YAML file (path), YAML text, or already parsed
    documents, with kubernetes.dynamic: its discovery finds a kind from a CRD applied just
    before once the API serves it (asked again until `timeout`), and its raw response keeps
    the Warning header (e.g. about a CRD schema), appended to `warnings`. Returns the
    applied objects. Discovery's cache file goes in a directory of its own, removed after."""
    out = []
    with tempfile.TemporaryDirectory(prefix="crimsonbench-discovery-") as cache:
        dyn = kubernetes.dynamic.DynamicClient(client, cache_file=f"{cache}/discovery.json")
        for doc in map(dict, _documents(source)):
            resource = _served(dyn, doc["apiVersion"], doc["kind"], timeout)
            meta = doc.setdefault("metadata", {})
            if resource.namespaced:
                meta["namespace"] = meta.get("namespace") or namespace or "default"
            resp = dyn.server_side_apply(resource, body=doc, field_manager=FIELD_MANAGER,
                                         force_conflicts=True, serialize=False)  # fmt: skip
            if resp.headers.get("Warning") and warnings is not None:
                warnings.append(f"{doc['kind']}/{meta['name']}: {resp.headers['Warning']}")
            out.append(dict(json.loads(resp.data)))
    return out


def _served(dyn: Any, api_version: str, kind: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:  # a miss makes the client discover again
            return dyn.resources.get(api_version=api_version, kind=kind)
        except kubernetes.dynamic.exceptions.ResourceNotFoundError:
            if time.monotonic() > deadline:
                raise LookupError(
                    f"the API server does not serve {kind} in {api_version}"
                ) from None
            time.sleep(0.2)


def _documents(source: str | Path | Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source):
        text = Path(source).read_text()
    elif isinstance(source, str):
        text = source
    else:
        yield from (d for d in source if d)
        return
    yield from (d for d in yaml.safe_load_all(text) if d)
