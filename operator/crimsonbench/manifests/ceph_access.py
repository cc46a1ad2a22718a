"""How a pod reaches Ceph: the monitors, a cephx user and its secret, mounted from the
Secret/ConfigMap the target provides, turned into /etc/ceph/ceph.conf by the container's
first lines (what Rook's toolbox does in an init container, so the pod has one container
to size).

Pods that use Ceph must run in the namespace of the Secret they read: the Rook cluster's
namespace for Rook (where rook-ceph-mon lives), the BenchmarkRun's for external clusters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from crimsonbench.errors import InvalidSpec
from crimsonbench.manifests.targets import KubeTarget
from crimsonbench.spec.models import ExternalTarget

CEPH_CONF = "/etc/ceph/ceph.conf"
SECRET_DIR = "/var/lib/crimsonbench"  # the cephx key (Rook) or keyring (external)
MON_ENDPOINTS_DIR = "/etc/rook"  # as in Rook's toolbox-job example


@dataclass(frozen=True)
class CephAccess:
    """The Secret holds either the bare cephx key (secret_is_keyring=False; a keyring is
    written from it, as Rook's toolbox does) or a whole keyring file. The user name comes
    literally (username) or from a key of the same Secret (username_key); "client." is
    added when missing. The monitors come literally (mon_host) or from Rook's endpoints
    ConfigMap ("a=10.0.0.1:6789,b=..."; mon names are stripped, as toolbox.sh does).
    """

    namespace: str  # the pods' namespace: Secrets and ConfigMaps are only mounted from it
    secret_name: str
    secret_key: str
    secret_is_keyring: bool = False
    username: str | None = None
    username_key: str | None = None
    mon_host: str | None = None
    mon_endpoints_configmap: str | None = None
    mon_endpoints_key: str = "data"

    def __post_init__(self) -> None:
        if (self.username is None) == (self.username_key is None):
            raise ValueError("CephAccess needs exactly one of username and username_key")
        if (self.mon_host is None) == (self.mon_endpoints_configmap is None):
            raise ValueError("CephAccess needs exactly one of mon_host and mon_endpoints_configmap")


def rook_access(namespace: str = "rook-ceph") -> CephAccess:
    """The Rook cluster's admin credentials, as Rook's toolbox-job example uses them:
    Secret rook-ceph-mon (ceph-username, ceph-secret), ConfigMap rook-ceph-mon-endpoints."""
    return CephAccess(
        namespace=namespace,
        secret_name="rook-ceph-mon",
        secret_key="ceph-secret",
        username_key="ceph-username",
        mon_endpoints_configmap="rook-ceph-mon-endpoints",
    )


def rook_client_access(namespace: str, client_name: str) -> CephAccess:
    """The user of a Rook CephClient named client_name: Rook writes Secret
    rook-ceph-client-<name> with userID (the name) and userKey (the cephx key)."""
    return CephAccess(
        namespace=namespace,
        secret_name=f"rook-ceph-client-{client_name}",
        secret_key="userKey",
        username_key="userID",
        mon_endpoints_configmap="rook-ceph-mon-endpoints",
    )


def external_access(namespace: str, target: ExternalTarget) -> CephAccess:
    """An external cluster: mon_host from the spec, a keyring file from keyringSecret (in
    the BenchmarkRun's namespace, which is therefore where the pods run)."""
    if target.keyring_secret is None:
        raise InvalidSpec(
            "spec.target.external.keyringSecret",
            "the operator reads the keyring from a Secret; create one "
            "(kubectl create secret generic NAME --from-file=keyring=...) and name it here",
        )
    return CephAccess(
        namespace=namespace,
        secret_name=target.keyring_secret.name,
        secret_key=target.keyring_secret.key,
        secret_is_keyring=True,
        username=target.user,
        mon_host=target.mon_host,
    )


def ceph_access_for(target: KubeTarget) -> CephAccess:
    """A target's admin access: Rook's admin credentials or the external keyring."""
    if target.rook_namespace is not None:
        return rook_access(target.rook_namespace)
    if target.external is not None:
        return external_access(target.jobs_namespace, target.external)
    raise InvalidSpec(
        "spec.target",
        "the operator runs rook or external targets; local targets run without Kubernetes, "
        "with `crimsonbench run`",
    )


def ceph_config_script(client_options: Mapping[str, str]) -> str:
    """The first lines of every Ceph-using container: /etc/ceph/ceph.conf and a keyring
    from the mounted Secret/ConfigMap, with the plan's librbd client options (which beat
    the mon database for this client only)."""
    client = "\n".join(f"{k} = {v}" for k, v in client_options.items())
    return f"""\
set -eu
umask 077
if [ -n "${{CEPH_MON_HOST:-}}" ]; then
  mon_host="$CEPH_MON_HOST"
else
  mon_host=$(sed -E 's/[a-z0-9_-]+=//g' {MON_ENDPOINTS_DIR}/mon-endpoints)
fi
user="$CEPH_USERNAME"
case "$user" in client.*) ;; *) user="client.$user" ;; esac
if [ -f {SECRET_DIR}/keyring ]; then
  keyring={SECRET_DIR}/keyring
else
  keyring=/etc/ceph/keyring
  printf '[%s]\\nkey = %s\\n' "$user" "$(cat {SECRET_DIR}/secret)" > "$keyring"
fi
cat > {CEPH_CONF} <<EOF
[global]
mon_host = $mon_host
keyring = $keyring

[client]
{client}
EOF
"""


def ceph_access_volumes(access: CephAccess) -> list[dict[str, Any]]:
    path = "keyring" if access.secret_is_keyring else "secret"
    items = [{"key": access.secret_key, "path": path}]
    volumes: list[dict[str, Any]] = [
        {"name": "ceph-config", "emptyDir": {}},
        {
            "name": "ceph-secret",
            # 0440 + fsGroup: readable by the non-root ceph group, by nobody else
            "secret": {"secretName": access.secret_name, "items": items, "defaultMode": 0o440},
        },
    ]
    if access.mon_endpoints_configmap is not None:
        volumes.append(
            {
                "name": "mon-endpoints",
                "configMap": {
                    "name": access.mon_endpoints_configmap,
                    "items": [{"key": access.mon_endpoints_key, "path": "mon-endpoints"}],
                },
            }
        )
    return volumes


def ceph_access_mounts(access: CephAccess) -> list[dict[str, Any]]:
    mounts: list[dict[str, Any]] = [
        {"name": "ceph-config", "mountPath": "/etc/ceph"},
        {"name": "ceph-secret", "mountPath": SECRET_DIR, "readOnly": True},
    ]
    if access.mon_endpoints_configmap is not None:
        mounts.append({"name": "mon-endpoints", "mountPath": MON_ENDPOINTS_DIR, "readOnly": True})
    return mounts


def ceph_access_env(access: CephAccess) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": "CEPH_CONF", "value": CEPH_CONF}]
    if access.username_key is not None:
        ref = {"name": access.secret_name, "key": access.username_key}
        env.append({"name": "CEPH_USERNAME", "valueFrom": {"secretKeyRef": ref}})
    else:
        env.append({"name": "CEPH_USERNAME", "value": access.username})
    if access.mon_host is not None:
        env.append({"name": "CEPH_MON_HOST", "value": access.mon_host})
    return env
