"""The Kubernetes API's refusals as the operator's own types. Every call through
`Kube` (kube.py) raises one of these instead of the client's ApiException, so no other
module reads an HTTP status code: it says `except Conflict`, `except Forbidden`.

    KubeError        what the API server said: .status, .reason, .message (its own words)
      Forbidden      401/403: RBAC, or an admission policy (.by_policy)
      Gone           404/410: no such object (any more)
      Conflict       409: it exists already, or changed since it was read
      Invalid        400/422: the body was refused (schema, CEL, admission)
      Unavailable    429, 5xx, anything else: try again later
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException

# A refused exec handshake (kubernetes.stream) comes back as status 0 with the HTTP status
# in its reason: "Handshake status 403 Forbidden -+-+- {headers} -+-+- {body}".
_HANDSHAKE = re.compile(r"Handshake status (\d{3})")
_BODY_SEPARATOR = "-+-+-"


class KubeError(Exception):
    """The API server refused a request."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status, self.reason, self.message = status, reason, message

    @property
    def by_policy(self) -> bool:
        """Refused by a ValidatingAdmissionPolicy (the chart's rbac.reachPolicy), not RBAC."""
        return "ValidatingAdmissionPolicy" in self.message


class Forbidden(KubeError):
    pass


class Gone(KubeError):
    pass


class Conflict(KubeError):
    pass


class Invalid(KubeError):
    pass


class Unavailable(KubeError):
    pass


_BY_STATUS: dict[int, type[KubeError]] = {
    401: Forbidden, 403: Forbidden, 404: Gone, 410: Gone, 409: Conflict, 400: Invalid,
    422: Invalid,
}  # fmt: skip


def refusal(exc: ApiException) -> KubeError:
    """The client's exception as one of ours, with the API server's own message (the
    Status body's `message`), never its headers."""
    status = int(exc.status or 0)
    reason = str(exc.reason or "")
    raw = exc.body
    if not status and (m := _HANDSHAKE.search(reason)):
        status = int(m.group(1))
        raw = raw or reason.rpartition(_BODY_SEPARATOR)[2]
        reason = reason.partition(_BODY_SEPARATOR)[0].replace("Handshake status", "").strip()
        reason = reason.removeprefix(str(status)).strip()
    return _BY_STATUS.get(status, Unavailable)(status, reason, _message(raw, reason))


def _message(raw: Any, reason: str) -> str:
    if isinstance(raw, bytes):
        raw = raw.decode(errors="replace")
    if not isinstance(raw, str) or not raw.strip():
        return ""
    try:
        doc = json.loads(raw)
    except ValueError:
        return raw.strip()[:2000]
    said = doc.get("message") if isinstance(doc, dict) else None
    return str(said)[:2000] if said else ("" if isinstance(doc, dict) else raw[:2000])


class Typed:
    """An API object of the kubernetes client (CoreV1Api, ...) whose every call raises
    KubeError instead of ApiException."""

    def __init__(self, api: Any) -> None:
        self._api = api

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._api, name)
        return typed(attr) if callable(attr) else attr


def typed(call: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call)
    def refused_as_ours(*args: Any, **kwargs: Any) -> Any:
        try:
            return call(*args, **kwargs)
        except ApiException as exc:
            raise refusal(exc) from exc

    return refused_as_ours
