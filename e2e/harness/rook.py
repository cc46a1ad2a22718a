"""Rook from the Go module proxy (never committed): its real CRDs and operator chart, read
from the module at test time; its operator binary and a Rook + Ceph image built locally
(e2e/build-rook.sh, e2e/rook/build-image.sh; cached outside the repository).

Which Rook runs is ONE setting: CRIMSONBENCH_ROOK_VERSION (default: the newest release
buildable here, `default_version`), one of RELEASES. A release says what it is built from
and with which Ceph its classic image comes; every build the harness starts gets those
(ROOK_VERSION, ROOK_APIS_VERSION, CEPH_VERSION, SUITE) and every cache is keyed by them
(rook/<version>/bin/rook, images/rook-ceph-<rook>-<ceph>[-crimson].tar). README "Rook and
Ceph versions" says which are tested here."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness.builds import REPO, cache_root, go_module_dir, run_build


@dataclass(frozen=True)
class RookRelease:
    """A Rook release the harness knows how to build and run."""

    version: str
    # github.com/rook/rook/pkg/apis at the release tag's commit, as a pseudo-version: rook's
    # go.mod replaces that module with ./pkg/apis, which its module zip lacks, so the build
    # requires it from the module proxy (e2e/build-rook.sh). "" where the proxy does not
    # serve it (then `unbuildable` says so and nothing is built).
    apis: str
    ceph: str  # the Ceph of the classic image (e2e/rook/build-image.sh)
    suite: str  # the Debian suite that Ceph comes from
    supported: tuple[int, ...]  # Ceph majors it supports (its pkg/operator/ceph/version)
    unbuildable: str = ""  # why it cannot be built here ("" = it can)
    # built from its release source (e2e/build-rook.sh: rook-<version>.tar.gz, sha256
    # checked, in $CRIMSONBENCH_SOURCES) instead of the module proxy's pkg/apis
    from_source: bool = False

    def allows(self, ceph_version: str) -> bool:
        """Whether the release runs this Ceph without cephVersion.allowUnsupported."""
        return int(ceph_version.split(".")[0]) in self.supported


RELEASES = {
    r.version: r
    for r in (
        # reef and squid (tentacle only with allowUnsupported)
        RookRelease("v1.17.8", "v0.0.0-20250820174513-8c7a83a2cf89", "18.2.7", "trixie",
                    (18, 19)),
        # The newest release (2026-08-20). Its module, CRDs and charts are served; its
        # pkg/apis at the tag's commit (v0.0.0-20260820210534-4e1b7a626891) is not (403
        # "This module version is not available", as for v1.20.5, v1.19.10, v1.18.11):
        # its operator is built from the release's source archive instead.
        RookRelease("v1.20.6", "", "20.2.4", "sid", (19, 20),  # squid, tentacle (>= 19.2)
                    from_source=True),
    )
}  # fmt: skip


def source_archive(release: RookRelease) -> Path:
    """Where e2e/build-rook.sh looks for a from_source release's archive."""
    sources = os.environ.get("CRIMSONBENCH_SOURCES") or str(REPO.parent / "shared" / "sources")
    return Path(sources) / f"rook-{release.version}.tar.gz"


def unavailable(release: RookRelease) -> str:
    """Why this release's operator binary is neither cached nor buildable here, in one
    line ("" = it is one or the other; a machine that built it some other way runs it:
    e2e/build-rook.sh keeps it)."""
    v = release.version
    if (cache_root() / "rook" / v / "bin" / "rook").is_file():
        return ""
    if release.unbuildable:
        return f"Rook {v} cannot be built here: {release.unbuildable}"
    if release.from_source and not source_archive(release).is_file():
        return (
            f"Rook {v} is built from its release source and {source_archive(release)} is not "
            f"there: put rook-{v}.tar.gz (`git archive --prefix=rook-{v.lstrip('v')}/ {v}`) "
            "in $CRIMSONBENCH_SOURCES, or run Rook's official images (README, Rook and Ceph "
            "versions)"
        )
    return ""


OLDEST_CLAIMED = "v1.17.8"  # README "Rook and Ceph versions": on demand, or where v1.20.6 is not
# newest first
_BY_AGE = sorted(RELEASES, key=lambda v: tuple(map(int, v[1:].split("."))), reverse=True)


def default_version() -> str:
    """The newest release this machine has built or can build: v1.20.6 wherever its source
    archive is (../shared/sources here), else the oldest we claim, built from the module
    proxy alone, so a user's clone still runs the kind tier (`fallback_note` says why)."""
    return next((v for v in _BY_AGE if not unavailable(RELEASES[v])), OLDEST_CLAIMED)


def fallback_note(chosen: str) -> str:
    """One line when `chosen` is older than the newest release because that one is
    unavailable here ("" otherwise)."""
    why = unavailable(RELEASES[_BY_AGE[0]]) if chosen != _BY_AGE[0] else ""
    return f"{why}; running Rook {chosen} instead" if why else ""


DEFAULT_ROOK_VERSION = default_version()
ROOK_VERSION = os.environ.get("CRIMSONBENCH_ROOK_VERSION", DEFAULT_ROOK_VERSION)
if ROOK_VERSION not in RELEASES:
    raise RuntimeError(
        f"CRIMSONBENCH_ROOK_VERSION={ROOK_VERSION!r} is not one of {', '.join(RELEASES)} "
        "(e2e/harness/rook.py RELEASES)"
    )
RELEASE = RELEASES[ROOK_VERSION]
# Ceph in the classic image e2e/rook/build-image.sh builds for this release
CEPH_VERSION = RELEASE.ceph
ROOK_IMAGE = f"localhost/rook-ceph:{ROOK_VERSION}-{CEPH_VERSION}"
# Ceph 20 makes aes256k cephx keys older clients cannot parse: from there the fio runner is
# ours on the same Ceph client, built with the Rook image ("" = the default fio image).
RELEASE_FIO_TAG = f"dev-ceph{CEPH_VERSION}" if int(CEPH_VERSION.split(".")[0]) >= 20 else ""
BUILD_ROOK_IMAGE = REPO / "e2e" / "rook" / "build-image.sh"
# The crimson flavour: Debian sid's 20.2.4 daemons + our crimson-osd as the OSD
# (e2e/rook/build-crimson-image.sh, on the Ceph root of e2e/crimson/build-ceph-root.sh).
CRIMSON_CEPH_VERSION = "20.2.4"
CRIMSON_ROOK_IMAGE = f"localhost/rook-ceph:{ROOK_VERSION}-{CRIMSON_CEPH_VERSION}-crimson"
BUILD_CRIMSON_ROOK_IMAGE = REPO / "e2e" / "rook" / "build-crimson-image.sh"
# The same daemons with the classic ceph-osd as the OSD: classic vs crimson on one Ceph build
CRIMSON_ROOT_CLASSIC_IMAGE = f"localhost/rook-ceph:{ROOK_VERSION}-{CRIMSON_CEPH_VERSION}-classic"
# our fio runner on the same Ceph (20.2's aes256k cephx keys need a 20.2 client), built with it
CRIMSON_FIO_IMAGE = f"localhost/crimsonbench-fio:dev-ceph{CRIMSON_CEPH_VERSION}"
BUILD_CRIMSON_ROOT = (f"e2e/build-crimson.sh {CRIMSON_CEPH_VERSION} && "
                      f"e2e/crimson/build-ceph-root.sh {CRIMSON_CEPH_VERSION}")  # fmt: skip


def build_env(release: RookRelease = RELEASE) -> dict[str, str]:
    """What every Rook build script is told: the one Rook version and what goes with it."""
    env = {"ROOK_VERSION": release.version, "CEPH_VERSION": release.ceph, "SUITE": release.suite}
    if release.apis:
        env["ROOK_APIS_VERSION"] = release.apis
    return env


class RookUnavailable(RuntimeError):
    """Rook's manifests cannot be fetched here (no Go, or the module proxy failed)."""


def rook_module_dir(version: str = ROOK_VERSION) -> Path:
    """The extracted github.com/rook/rook@version module (in Go's module cache)."""
    return go_module_dir("github.com/rook/rook", version, RookUnavailable)


def rook_crds_yaml(version: str = ROOK_VERSION) -> Path:
    """deploy/examples/crds.yaml of Rook `version`: CephCluster, CephBlockPool, CephClient..."""
    path = rook_module_dir(version) / "deploy" / "examples" / "crds.yaml"
    if not path.is_file():
        raise RookUnavailable(f"github.com/rook/rook@{version} has no {path.name} at {path}")
    return path


def rook_chart(dest: Path, version: str = ROOK_VERSION) -> Path:
    """Rook's own operator chart (deploy/charts/rook-ceph) copied to dest/rook-ceph with its
    `library` dependency in charts/ (helm refuses a chart whose dependency is missing, and
    the module cache is read-only). Returns the chart directory."""
    charts = rook_module_dir(version) / "deploy" / "charts"
    chart = dest / "rook-ceph"
    shutil.copytree(charts / "rook-ceph", chart)
    shutil.copytree(charts / "library", chart / "charts" / "library")
    # From v1.20 the chart depends on the ceph-csi-operator chart from a chart repository
    # (condition csi.installCsiOperator): no CSI runs here (our values turn it off), and
    # helm refuses a chart whose dependency is missing, so the copy does without it.
    meta = chart / "Chart.yaml"
    doc = yaml.safe_load(meta.read_text())
    deps = [d for d in doc.get("dependencies") or [] if d.get("name") != "ceph-csi-operator"]
    if deps != (doc.get("dependencies") or []):
        doc["dependencies"] = deps
        meta.chmod(0o644)
        meta.write_text(yaml.safe_dump(doc, sort_keys=False))
    for path in (chart, *chart.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)  # the module cache's files are 0444
    return chart


def rook_csi_crds(version: str = ROOK_VERSION) -> list[dict[str, object]]:
    """The csi.ceph.io CRDs (CephConnection, ClientProfile, ...) of releases whose chart
    takes CSI from the ceph-csi-operator chart (v1.20): their operator creates a
    CephConnection per cluster and fails the CephCluster ("no matches for kind
    CephConnection") without the CRD, even with installCsiOperator false. The CRDs only,
    from the release's own deploy/examples/csi-operator.yaml; [] for older releases."""
    module = rook_module_dir(version)
    chart = yaml.safe_load((module / "deploy" / "charts" / "rook-ceph" / "Chart.yaml").read_text())
    if not any(d.get("name") == "ceph-csi-operator" for d in chart.get("dependencies") or []):
        return []
    docs = yaml.safe_load_all((module / "deploy" / "examples" / "csi-operator.yaml").read_text())
    return [d for d in docs if d and d.get("kind") == "CustomResourceDefinition"]


def config_override(namespace: str) -> dict[str, object]:
    """Rook's rook-config-override ConfigMap (the daemons' ceph.conf), made before the
    CephCluster: a test cluster on the machine's shared disk. A mon refuses to start once
    the *host's* filesystem has less than mon_data_avail_crit (5 %) free, whatever the
    cluster holds (seen: "available: 4% 11 GiB" of 252 GiB, every mon in CrashLoopBackOff,
    while other sessions' builds filled the disk); 1 % keeps that from failing every Rook
    test. The mons still warn below mon_data_avail_warn (30 %): readiness ignores health."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "rook-config-override", "namespace": namespace},
        "data": {"config": "[global]\nmon_data_avail_crit = 1\n"},
    }


def rook_install_args(dest: Path, namespace: str, values: Path, image: str) -> list[str]:
    """`helm install` arguments for Rook's own operator chart (copied under DEST) into
    NAMESPACE with VALUES, running IMAGE (repository:tag, loaded into the nodes)."""
    repo, tag = image.rsplit(":", 1)
    return [
        "install", "rook-ceph", str(rook_chart(dest)), "--namespace", namespace,
        "--create-namespace", "-f", str(values),
        "--set", f"image.repository={repo}", "--set", f"image.tag={tag}",
    ]  # fmt: skip


def crimson_rook_image_archive(timeout: float = 30 * 60, osd_flavor: str = "crimson") -> Path:
    """A docker-archive of CRIMSON_ROOK_IMAGE (e2e/rook/build-crimson-image.sh; ~1 min once
    the Ceph root is built); OSD_FLAVOR classic: of CRIMSON_ROOT_CLASSIC_IMAGE, the same
    daemons with the classic ceph-osd. RookUnavailable, naming the command that builds it,
    where the crimson Ceph root is not built: that build takes 1-2 h and never runs inside
    a test."""
    if os.geteuid() != 0:
        raise RookUnavailable("building the Rook image needs root (debootstrap, rootful podman)")
    cache = cache_root()
    root = cache / "ceph-root" / CRIMSON_CEPH_VERSION
    buildable()
    if not (root / ".done-crimson").exists():
        raise RookUnavailable(
            f"no crimson Ceph root at {root} (no Debian package ships crimson-osd); build it "
            f"once with `{BUILD_CRIMSON_ROOT}` (~2 h cold on 2 cores; it can run in the "
            "background)"
        )
    env = {**build_env(), "CEPH_VERSION": CRIMSON_CEPH_VERSION, "SUITE": "sid",
           "OSD_FLAVOR": osd_flavor}  # fmt: skip
    return _run_build(BUILD_CRIMSON_ROOK_IMAGE, timeout, image=True, env=env)


def crimson_fio_archive(timeout: float = 30 * 60) -> Path:
    """A docker-archive of CRIMSON_FIO_IMAGE (built by e2e/rook/build-crimson-image.sh with
    the crimson Rook image: see crimson_rook_image_archive)."""
    rook = crimson_rook_image_archive(timeout)
    archive = rook.parent / f"crimsonbench-fio-dev-ceph{CRIMSON_CEPH_VERSION}.tar"
    if not archive.is_file():
        raise RuntimeError(f"{BUILD_CRIMSON_ROOK_IMAGE.name} left no {archive}")
    return archive


def _run_build(script: Path, timeout: float, image: bool = False,
               env: dict[str, str] | None = None) -> Path:  # fmt: skip
    """A Rook build script's result (the path it prints last); RookUnavailable where the
    machine is at fault, a slow build included (builds.run_build)."""
    out = run_build(
        script,
        RookUnavailable,
        timeout=timeout,
        image=image,
        env=env if env is not None else build_env(),
        slow_is_environmental=True,
    )
    return Path(out.strip().splitlines()[-1])


def buildable(release: RookRelease = RELEASE) -> None:
    """RookUnavailable, in one line, where this release's operator binary is neither cached
    nor buildable here."""
    if why := unavailable(release):
        raise RookUnavailable(why)


def release_fio_archive(timeout: float = 90 * 60) -> Path | None:
    """Our fio runner on the release's Ceph client (RELEASE_FIO_TAG), built with the Rook
    image; None where the default fio image does."""
    if not RELEASE_FIO_TAG:
        return None
    archive = rook_image_archive(timeout).parent / f"crimsonbench-fio-{RELEASE_FIO_TAG}.tar"
    if not archive.is_file():
        raise RuntimeError(f"{BUILD_ROOK_IMAGE.name} left no {archive}")
    return archive


def rook_image_archive(timeout: float = 90 * 60) -> Path:
    """A docker-archive of ROOK_IMAGE (e2e/rook/build-image.sh: debootstrap trixie + podman;
    cold ≈ 10 min, unchanged → seconds)."""
    if os.geteuid() != 0:
        raise RookUnavailable("building the Rook image needs root (debootstrap, rootful podman)")
    buildable()
    return _run_build(BUILD_ROOK_IMAGE, timeout, image=True)
