"""The API's refusals as the operator's own types (controller/kube_errors.py): the status
picks the type, the message is the API server's own words (never its headers), a refused
exec handshake (status 0, the HTTP status in its reason) is typed like any refusal, and a
client object wrapped in Typed raises only these."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from crimsonbench.controller.kube_errors import (
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    KubeError,
    Typed,
    Unavailable,
    refusal,
)


def api_error(status: int, reason: str, message: str | None = None) -> ApiException:
    exc = ApiException(status=status, reason=reason)
    if message is not None:
        exc.body = json.dumps({"kind": "Status", "message": message, "code": status})
    exc.headers = {"Audit-Id": "x" * 40}
    return exc


@pytest.mark.parametrize(
    ("status", "kind"),
    [(401, Forbidden), (403, Forbidden), (404, Gone), (410, Gone), (409, Conflict),
     (400, Invalid), (422, Invalid), (429, Unavailable), (500, Unavailable),
     (503, Unavailable), (0, Unavailable), (418, Unavailable)],
)  # fmt: skip
def test_the_status_picks_the_type(status: int, kind: type[KubeError]) -> None:
    got = refusal(api_error(status, "Why"))
    assert type(got) is kind and got.status == status


def test_the_message_is_the_servers_own_words_never_its_headers() -> None:
    got = refusal(api_error(403, "Forbidden", 'jobs.batch "a" is forbidden: exceeded quota: q'))
    assert str(got) == '403 Forbidden: jobs.batch "a" is forbidden: exceeded quota: q'
    assert got.message == 'jobs.batch "a" is forbidden: exceeded quota: q'
    assert "Audit-Id" not in str(got) and not got.by_policy
    assert str(refusal(api_error(500, "Internal Server Error"))) == "500 Internal Server Error"
    odd = api_error(429, "Too Many Requests")
    odd.body = "<html>slow down</html>"  # not a Status: said as it came, cut
    assert str(refusal(odd)) == "429 Too Many Requests: <html>slow down</html>"
    huge = api_error(500, "Boom")
    huge.body = b"x" * 100_000  # bytes, and long
    assert len(refusal(huge).message) == 2000


def test_a_refused_exec_handshake_is_a_refusal_like_any_other() -> None:
    body = json.dumps(
        {
            "kind": "Status",
            "message": 'pods "osd-0" is forbidden: '
            "ValidatingAdmissionPolicy 'crimsonbench-reach' denied request",
        }
    )
    exc = ApiException(status=0, reason=f"Handshake status 403 Forbidden -+-+- {{}} -+-+- {body}")
    got = refusal(exc)
    assert isinstance(got, Forbidden) and got.status == 403 and got.reason == "Forbidden"
    assert got.by_policy and got.message.startswith('pods "osd-0" is forbidden')


def test_a_typed_client_object_raises_only_ours() -> None:
    class Client:
        attribute = "kept"

        def read(self, name: str) -> str:
            raise api_error(404, "Not Found", f'configmaps "{name}" not found')

        def ok(self) -> int:
            return 7

    api = Typed(Client())
    assert api.attribute == "kept" and api.ok() == 7
    with pytest.raises(Gone, match='configmaps "x" not found') as info:
        api.read("x")
    assert isinstance(info.value.__cause__, ApiException)  # the client's, kept as the cause
