"""The small Jobs around a run: the node topology probe, the cluster facts of preflight,
ceph commands (crimson setup, `config rm` cleanup), creating and removing the RBD images.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from crimsonbench.manifests.ceph_access import CephAccess, ceph_config_script
from crimsonbench.manifests.fio import checked_name
from crimsonbench.manifests.naming import dns_name, labels
from crimsonbench.manifests.pods import (
    PodOptions,
    ScriptJob,
    container_security,
    guaranteed,
    job,
    pod_spec,
    script_job,
)
from crimsonbench.plan.fio_jobs import RBD_CLIENT_OPTIONS
from crimsonbench.plan.topology import LSCPU_COMMAND

# The Jobs of a run that outlive its other Jobs (they run while those are being deleted)
ROLE_RBD_CLEANUP = "rbd-cleanup"
ROLE_CEPH_CLEANUP = "ceph-cleanup"  # ceph_commands_job(purpose="cleanup")
MAINTENANCE_TTL_S = 3600


def probe_job_name(run: str, node: str) -> str:
    return dns_name(run, "lscpu", node)


def topology_probe_job(
    run: str, node: str, namespace: str, opts: PodOptions, *, deadline_s: int = 300
) -> dict[str, Any]:
    """A Job printing `lscpu -e=CPU,NODE,SOCKET,CORE,ONLINE --json` on `node` (its log is
    the JSON parse_lscpu_json reads). It tolerates every taint: storage nodes are often
    tainted, and the node is chosen explicitly. No privilege: /sys shows the host's CPUs
    to any container; the host network only where pods have no other."""
    container = {
        "name": "lscpu",
        "image": opts.image,
        "imagePullPolicy": opts.image_pull_policy,
        "command": shlex.split(LSCPU_COMMAND),
        "resources": guaranteed("100m", "64Mi"),
        "securityContext": container_security(),
    }
    pod = pod_spec([container], [], node, opts, [{"operator": "Exists"}])
    return job(probe_job_name(run, node), namespace, labels(run, "probe", None, node), pod,
               deadline_s)  # fmt: skip


def _maintenance_job(
    name: str,
    labels_: dict[str, str],
    script: str,
    access: CephAccess,
    opts: PodOptions,
    *,
    deadline_s: int,
    env: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """A one-CPU Job running `script` against Ceph, outside any step. Some outlive the
    run's other Jobs (cleanup after the run is gone), so nobody deletes them: the TTL does."""
    body = script_job(
        ScriptJob(
            name=name,
            namespace=access.namespace,
            labels=labels_,
            script=ceph_config_script(RBD_CLIENT_OPTIONS) + script,
            access=access,
            cpu="1",
            memory="256Mi",
            deadline_s=deadline_s,
            env=tuple(env),
        ),
        opts,
    )
    body["spec"]["ttlSecondsAfterFinished"] = MAINTENANCE_TTL_S
    return body


def ceph_commands_job(
    run: str,
    purpose: str,
    commands: Sequence[Sequence[str]],
    access: CephAccess,
    opts: PodOptions,
    *,
    deadline_s: int = 300,
) -> dict[str, Any]:
    """`ceph <args>` for each command, in order, as the access's user: the crimson
    prerequisites before OSDs roll out (`osd set-allow-crimson`) and the `config rm`
    cleanup Rook does not do when cephConfig keys are removed."""
    if not commands:
        raise ValueError("no ceph commands to run")
    lines = [
        'ceph --name "$user" ' + " ".join(shlex.quote(str(a)) for a in cmd) for cmd in commands
    ]
    return _maintenance_job(
        dns_name(run, "ceph", purpose),
        labels(run, f"ceph-{purpose}"),
        "set -x\n" + "\n".join(lines) + "\n",
        access,
        opts,
        deadline_s=deadline_s,
    )


# What preflight reads from the cluster, each JSON document between delimiter lines
# (results.step_log.parse_sections reads them). Read-only commands. The mon database's
# values (config-dump) are what the restore puts back; the fsid names the cluster.
FACTS = {
    "config-ls": "config ls",
    "config-dump": "config dump",
    "fsid": "fsid",
    "osd-metadata": "osd metadata",
    "pool-ls": "osd pool ls",
    "versions": "versions",
}


# The object store every crimson OSD runs, asked of the daemon itself: crimson's metadata
# has no osd_objectstore (classic's has), so `ceph tell osd.N config get` reads the option
# crimson opened its store from: crimson_osd_objectstore on squid/tentacle (crimson ignores
# osd_objectstore there), osd_objectstore on Ceph 21/main (no crimson_osd_objectstore).
# The first name the daemon knows wins. One JSON line per crimson OSD:
#   {"id": N, "option": NAME, "answer": <the daemon's JSON answer>}
# An OSD that does not answer in 60 s prints nothing (preflight names it).
OSD_STORES = "osd-stores"
OSD_STORES_SCRIPT = """\
for id in $(ceph --name "$user" osd ls); do
  meta=$(ceph --name "$user" osd metadata "$id" --format json 2>/dev/null) || continue
  printf '%s' "$meta" | grep -Eq '"osd_type": ?"crimson"' || continue
  for opt in crimson_osd_objectstore osd_objectstore; do
    if answer=$(timeout 60 ceph --name "$user" tell "osd.$id" config get "$opt" --format json \\
                2>/dev/null) && [ -n "$answer" ]; then
      printf '{"id": %s, "option": "%s", "answer": %s}\\n' "$id" "$opt" "$answer"
      break
    fi
  done
done
"""


def cluster_fsid_job(run: str, access: CephAccess, opts: PodOptions) -> dict[str, Any]:
    """`ceph fsid` of an external cluster (its log: {"fsid": ...}): the cluster's identity,
    which names its lease (a mon address has many spellings; the fsid has one)."""
    return _maintenance_job(
        dns_name(run, "fsid"),
        labels(run, "fsid"),
        'ceph --name "$user" fsid --format json\n',
        access,
        opts,
        deadline_s=300,
    )


def cluster_facts_job(run: str, access: CephAccess, opts: PodOptions) -> dict[str, Any]:
    """Read-only facts for preflight: the option names the mons know (crimson option
    family), every OSD's metadata (crimson or classic, object store, host), the pools, and
    the store each crimson OSD's daemon says it runs (OSD_STORES)."""
    lines = []
    for name, cmd in FACTS.items():
        lines.append(f'echo "==> {name} <=="')
        lines.append(f'ceph --name "$user" {cmd} --format json')
        lines.append("echo")
    lines.append(f'echo "==> {OSD_STORES} <=="')
    lines.append(OSD_STORES_SCRIPT.rstrip("\n"))
    return _maintenance_job(
        dns_name(run, "facts"),
        labels(run, "facts"),
        "\n".join(lines) + "\n",
        access,
        opts,
        deadline_s=300,
    )


# Every image a run makes carries its run's uid (`rbd image-meta`, IMAGE_OWNER), and only
# images that carry it are the run's: an image of that name without it (someone else's,
# however unlikely with uid-derived names) is a refusal naming it, never adopted or removed.
IMAGE_OWNER = "crimsonbench.run-uid"

# Creates the images (CB_IMAGES, space separated) in CB_POOL; one already there is the
# run's only when tagged with CB_RUN_UID (an earlier attempt of this run made it).
CREATE_IMAGES_SCRIPT = f"""\
for img in ${{CB_IMAGES:-}}; do
  if rbd --name "$user" info "$CB_POOL/$img" > /dev/null 2>&1; then
    owner=$(rbd --name "$user" image-meta get "$CB_POOL/$img" {IMAGE_OWNER} 2>/dev/null || true)
    [ "$owner" = "$CB_RUN_UID" ] && continue
    echo "refused: image $CB_POOL/$img exists and is not this run's (its {IMAGE_OWNER}: \
${{owner:-none}}); nothing of it is used or removed" >&2
    exit 3
  fi
  rbd --name "$user" create --size "${{CB_IMAGE_BYTES}}B" "$CB_POOL/$img"
  rbd --name "$user" image-meta set "$CB_POOL/$img" {IMAGE_OWNER} "$CB_RUN_UID"
done
"""


def create_images_job(
    run: str,
    pool: str,
    images: Sequence[str],
    image_bytes: int,
    run_uid: str,
    access: CephAccess,
    opts: PodOptions,
) -> dict[str, Any]:
    if not images:
        raise ValueError("no images to create")
    return _maintenance_job(
        dns_name(run, "rbd", "create"),
        labels(run, "rbd-create"),
        CREATE_IMAGES_SCRIPT,
        access,
        opts,
        deadline_s=600,
        env=[
            *_images_env(pool, images, run_uid),
            {"name": "CB_IMAGE_BYTES", "value": str(image_bytes)},
        ],  # fmt: skip
    )


# Removes the run's images (CB_IMAGES) from CB_POOL: only those tagged with CB_RUN_UID;
# absent ones are fine. fio servers of a deleted Job may still hold a watch for a few
# seconds, so `rbd rm` is retried a while. One JSON line per image: {"image", "did":
# removed | kept (not the run's) | gone}.
REMOVE_IMAGES_SCRIPT = f"""\
for img in ${{CB_IMAGES:-}}; do
  if ! rbd --name "$user" info "$CB_POOL/$img" > /dev/null 2>&1; then
    echo "{{\\"image\\": \\"$img\\", \\"did\\": \\"gone\\"}}"; continue
  fi
  owner=$(rbd --name "$user" image-meta get "$CB_POOL/$img" {IMAGE_OWNER} 2>/dev/null || true)
  if [ "$owner" != "$CB_RUN_UID" ]; then
    echo "{{\\"image\\": \\"$img\\", \\"did\\": \\"kept\\"}}"; continue
  fi
  tries=0
  while rbd --name "$user" info "$CB_POOL/$img" > /dev/null 2>&1; do
    rbd --name "$user" rm --no-progress "$CB_POOL/$img" && break
    tries=$((tries + 1))
    [ "$tries" -lt 30 ] || exit 1
    sleep 2
  done
  echo "{{\\"image\\": \\"$img\\", \\"did\\": \\"removed\\"}}"
done
"""


def remove_images_job(
    run: str, pool: str, images: Sequence[str], run_uid: str, access: CephAccess,
    opts: PodOptions,
) -> dict[str, Any]:  # fmt: skip
    """A Job removing the run's RBD images (those tagged with its uid): on external
    clusters nothing else does (on Rook the run's CephBlockPool goes, and its images with
    it)."""
    if not images:
        raise ValueError("no images to remove")
    return _maintenance_job(
        dns_name(run, "rbd", "cleanup"),
        labels(run, ROLE_RBD_CLEANUP),
        REMOVE_IMAGES_SCRIPT,
        access,
        opts,
        deadline_s=300,
        env=_images_env(pool, images, run_uid),
    )


def image_removal_summary(log: str) -> str:
    """What the removal Job did, from its JSON lines (anything else is ignored)."""
    did: dict[str, list[str]] = {}
    for line in log.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and {"image", "did"} <= row.keys():
            did.setdefault(str(row["did"]), []).append(str(row["image"]))
    words = {"removed": "removed", "kept": "kept, not the run's (no or another run uid)",
             "gone": "already gone"}  # fmt: skip
    parts = [f"{len(v)} {words.get(k, k)}" + (f": {', '.join(v[:10])}" if k == "kept" else "")
             for k, v in sorted(did.items())]  # fmt: skip
    return "RBD images: " + ("; ".join(parts) or "none reported")


def _images_env(pool: str, images: Sequence[str], run_uid: str) -> list[dict[str, Any]]:
    """The pool, the images (space separated) a script works on and the run's uid."""
    names = " ".join(checked_name(i) for i in images)
    return [{"name": "CB_POOL", "value": pool}, {"name": "CB_IMAGES", "value": names},
            {"name": "CB_RUN_UID", "value": checked_name(run_uid)}]  # fmt: skip


# The mon database after the restore: each option the run made Rook set goes back to what
# the mon database had before the run (`config rm` if nothing), and only while it still
# holds the run's value (someone who changed it since decides). One JSON line per option:
#   {"who": W, "key": K, "did": "rm" | "set" | "kept" | "gone"}
MON_RESTORE_SCRIPT = """\
export user
python3 - <<'PY'
import json, os, subprocess
user = os.environ["user"]
def ceph(*args):
    return subprocess.run(["ceph", "--name", user, *args], check=True,
                          capture_output=True, text=True).stdout
def same(a, b):  # the mon keeps numbers its own way: "0.5" is "0.500000" there
    try:
        return a == b or float(a) == float(b)
    except ValueError:
        return False
dump = json.loads(ceph("config", "dump", "--format", "json"))
now = {(e["section"], e["name"]): e["value"] for e in dump if not e.get("mask")}
for c in json.loads(os.environ["CB_MON_CHANGES"]):
    who, key = c["who"], c["key"]
    current = now.get((who, key))
    if current is None:
        did = "gone"
    elif not same(current, c["value"]):
        did = "kept"
    elif c.get("before") is None:
        ceph("config", "rm", who, key)
        did = "rm"
    else:
        ceph("config", "set", who, key, c["before"])
        did = "set"
    print(json.dumps({"who": who, "key": key, "did": did}), flush=True)
PY
"""


def mon_restore_job(
    run: str, changes: Sequence[Mapping[str, Any]], access: CephAccess, opts: PodOptions
) -> dict[str, Any]:
    """A Job putting the mon database's options back (MON_RESTORE_SCRIPT). changes: each
    {"who", "key", "value" (the run's), "before" (None: unset before the run)}."""
    if not changes:
        raise ValueError("no options to put back")
    body = json.dumps([{k: c.get(k) for k in ("who", "key", "value", "before")}
                       for c in changes], separators=(",", ":"))  # fmt: skip
    return _maintenance_job(
        dns_name(run, "ceph", "cleanup"),
        labels(run, ROLE_CEPH_CLEANUP),
        "set -x\n" + MON_RESTORE_SCRIPT,
        access,
        opts,
        deadline_s=300,
        env=[{"name": "CB_MON_CHANGES", "value": body}],
    )
