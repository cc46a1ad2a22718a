"""A real Kubernetes control plane on loopback: etcd, kube-apiserver, kube-controller-manager
(and optionally kube-scheduler), built from source by e2e/build-k8s-binaries.sh.

    with ControlPlane() as cp:
        cp.apply_yaml("crds/benchmarkrun.yaml")
        api = cp.admin_api_client()
        as_sa = cp.client_for_service_account("default", "crimsonbench-operator")

Everything (certificates, keys, tokens, etcd data, logs, kubeconfigs) lives in one temporary
directory that teardown removes. Every component runs in its own process group and is killed
with it; children also get PR_SET_PDEATHSIG, so a crashed test run leaves nothing behind.
No kubelet: Pods are created and scheduled (with the scheduler) but never run.
"""

from __future__ import annotations

import os
import shutil
import ssl
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Self

import kubernetes.client
import kubernetes.dynamic
import kubernetes.dynamic.exceptions
import yaml

from harness.apply import server_side_apply
from harness.builds import REPO, cache_root, run_build
from harness.pki import Pki, make_pki
from harness.processes import Component, free_port, spawn, tail, wait_component

BUILD_SCRIPT = REPO / "e2e" / "build-k8s-binaries.sh"
K8S_VERSION = "v1.36.3"
REQUIRED = ("etcd", "kube-apiserver", "kube-controller-manager")
SERVICE_CIDR = "10.96.0.0/24"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"


class BinariesUnavailable(RuntimeError):
    """The control-plane binaries are not built and cannot be built on this machine."""


# ------------------------------------------------------------------ binaries


def ensure_binaries(version: str = K8S_VERSION, timeout: float = 90 * 60) -> Path:
    """Return the directory holding etcd, kube-apiserver, kube-controller-manager and
    kube-scheduler for `version`, building them first if
    needed (cold: ~15-20 min, once per machine; cached under ~/.cache/crimsonbench, outside
    the repository).

    $CRIMSONBENCH_K8S_BIN points at prebuilt binaries instead. Raises BinariesUnavailable
    when Go is missing or the build fails (the message has the tail of the build log)."""
    override = os.environ.get("CRIMSONBENCH_K8S_BIN")
    if override:
        bin_dir = Path(override)
        _check_bin_dir(bin_dir)
        return bin_dir
    bin_dir = cache_root() / "k8s" / version / "bin"
    components = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
    if all((bin_dir / b).is_file() for b in ("etcd", *components)):
        return bin_dir
    if shutil.which("go") is None:
        raise BinariesUnavailable(
            f"Go is not installed, so the Kubernetes {version} control plane cannot be built "
            f"(e2e/build-k8s-binaries.sh needs `go`; or set CRIMSONBENCH_K8S_BIN)"
        )
    bin_dir.parent.mkdir(parents=True, exist_ok=True)
    env = {"K8S_VERSION": version, "K8S_COMPONENTS": " ".join(components)}
    try:  # one build per machine at a time: a second caller waits for the first one's
        out = run_build(BUILD_SCRIPT, BinariesUnavailable, failure=BinariesUnavailable, env=env,
                        timeout=timeout, lock=bin_dir.parent / "build.lock")  # fmt: skip
    except BinariesUnavailable as exc:
        log = bin_dir.parent / "build.log"
        raise BinariesUnavailable(f"{exc}\n--- tail of {log}:\n{tail(log)}") from exc
    built = Path(out.strip().splitlines()[-1])
    _check_bin_dir(built)
    return built


def _check_bin_dir(bin_dir: Path) -> None:
    missing = [b for b in REQUIRED if not os.access(bin_dir / b, os.X_OK)]
    if missing:
        raise BinariesUnavailable(f"{bin_dir} lacks {', '.join(missing)}")


@dataclass
class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager (+ kube-scheduler) on 127.0.0.1.

    A context manager: `__enter__` starts and waits for readiness, `__exit__` kills every
    process group and removes the directory (set keep_dir=True, or $CRIMSONBENCH_KEEP_DIR=1,
    to keep logs and etcd data for a post-mortem)."""

    bin_dir: Path | None = None
    scheduler: bool = False
    controller_manager: bool = True
    ready_timeout: float = 90.0
    keep_dir: bool = field(default_factory=lambda: os.environ.get("CRIMSONBENCH_KEEP_DIR") == "1")
    extra_apiserver_flags: tuple[str, ...] = ()

    dir: Path = field(init=False)
    server: str = field(init=False)
    admin_token: str = field(init=False)
    timings: dict[str, float] = field(init=False, default_factory=dict)
    apply_warnings: list[str] = field(init=False, default_factory=list)
    _components: list[Component] = field(init=False, default_factory=list)
    _pki: Pki = field(init=False)
    _tokens: dict[str, str] = field(init=False, default_factory=dict)

    # -------------------------------------------------------------- lifecycle

    def start(self) -> None:
        t0 = time.monotonic()
        if self.bin_dir is None:
            self.bin_dir = ensure_binaries()
        self.dir = Path(tempfile.mkdtemp(prefix="crimsonbench-k8s-"))
        try:
            self._pki = make_pki(self.dir / "pki", SERVICE_CIDR)
            self._write_tokens()
            self._start_etcd()
            self._start_apiserver()
            self.timings["apiserver_ready"] = time.monotonic() - t0
            if self.controller_manager:
                self._start_kube_component(
                    "kube-controller-manager",
                    "system:kube-controller-manager",
                    [
                        "--use-service-account-credentials",
                        "--controllers=*,-nodeipam,-cloud-node-lifecycle",
                        f"--service-account-private-key-file={self._pki.sa_key}",
                        f"--root-ca-file={self._pki.ca_crt}",
                        f"--cluster-signing-cert-file={self._pki.ca_crt}",
                        f"--cluster-signing-key-file={self._pki.ca_key}",
                        f"--service-cluster-ip-range={SERVICE_CIDR}",
                    ],
                )
            if self.scheduler:
                self._start_kube_component("kube-scheduler", "system:kube-scheduler", [])
            self.timings["ready"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        # Clients first, store last, so nothing logs errors about a vanished peer for long.
        for comp in reversed(self._components):
            comp.stop()
        self._components.clear()
        if getattr(self, "dir", None) is not None and self.dir.exists() and not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Self:
        self.start()  # cleans up after itself if it fails
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def pids(self) -> dict[str, int]:
        return {c.name: c.proc.pid for c in self._components}

    def rss(self) -> dict[str, int]:
        """Resident memory of each component, in bytes."""
        return {c.name: c.rss_bytes() for c in self._components}

    # -------------------------------------------------------------- components

    def _write_tokens(self) -> None:
        # static tokens: user, uid, groups. kcm and the scheduler use their RBAC identities.
        users = {
            "admin": ("admin", "system:masters"),
            "system:kube-controller-manager": ("kcm", ""),
            "system:kube-scheduler": ("scheduler", ""),
        }
        rows = []
        for user, (uid, groups) in users.items():
            token = os.urandom(24).hex()
            self._tokens[user] = token
            rows.append(f'{token},{user},{uid},"{groups}"' if groups else f"{token},{user},{uid}")
        (self.dir / "tokens.csv").write_text("\n".join(rows) + "\n")
        self.admin_token = self._tokens["admin"]

    def _spawn(self, name: str, argv: list[str]) -> Component:
        comp = spawn(name, argv, self.dir)
        self._components.append(comp)
        return comp

    def _start_etcd(self) -> None:
        assert self.bin_dir is not None
        client, peer = free_port(), free_port()
        self._etcd_url = f"http://127.0.0.1:{client}"
        comp = self._spawn(
            "etcd",
            [
                str(self.bin_dir / "etcd"),
                "--name=e2e",
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls={self._etcd_url}",
                f"--advertise-client-urls={self._etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=e2e=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync",  # throwaway data: skip fsync, much faster on shared disks
                "--log-level=warn",
            ],
        )
        self._wait(comp, lambda: _http_ok(f"{self._etcd_url}/health"), what="/health")

    def _start_apiserver(self) -> None:
        assert self.bin_dir is not None
        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        p = self._pki
        comp = self._spawn(
            "kube-apiserver",
            [
                str(self.bin_dir / "kube-apiserver"),
                f"--etcd-servers={self._etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.dir / 'apiserver-certs'}",
                f"--tls-cert-file={p.apiserver_crt}",
                f"--tls-private-key-file={p.apiserver_key}",
                f"--client-ca-file={p.ca_crt}",
                f"--token-auth-file={self.dir / 'tokens.csv'}",
                f"--service-account-key-file={p.sa_key}",
                f"--service-account-signing-key-file={p.sa_key}",
                f"--service-account-issuer={SA_ISSUER}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                "--endpoint-reconciler-type=none",
                "--allow-privileged=true",
                "--profiling=false",
                f"--requestheader-client-ca-file={p.front_proxy_ca_crt}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={p.front_proxy_client_crt}",
                f"--proxy-client-key-file={p.front_proxy_client_key}",
                *self.extra_apiserver_flags,
            ],
        )
        ctx = ssl.create_default_context(cafile=str(p.ca_crt))
        self._wait(
            comp,
            lambda: _http_ok(f"{self.server}/readyz", ctx=ctx, token=self.admin_token),
            what="/readyz",
        )

    def _start_kube_component(self, name: str, user: str, flags: list[str]) -> None:
        assert self.bin_dir is not None
        kubeconfig = self.kubeconfig(self.dir / f"{name}.kubeconfig", token=self._tokens[user])
        port = free_port()
        comp = self._spawn(
            name,
            [
                str(self.bin_dir / name),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.dir / (name + '-certs')}",
                "--leader-elect=false",
                *flags,
            ],
        )
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # self-signed serving cert made at startup
        self._wait(comp, lambda: _http_ok(f"https://127.0.0.1:{port}/healthz", ctx=ctx), "/healthz")

    def _wait(self, comp: Component, probe: Callable[[], Any], what: str) -> None:
        self.timings[comp.name] = wait_component(comp, probe, what, self.ready_timeout)

    # -------------------------------------------------------------- clients

    def kubeconfig(self, path: str | Path, token: str | None = None) -> Path:
        """Write a kubeconfig for this control plane (admin unless a token is given)."""
        path = Path(path)
        doc = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "e2e",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority": str(self._pki.ca_crt),
                    },
                }
            ],
            "users": [{"name": "e2e", "user": {"token": token or self.admin_token}}],
            "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "e2e"}}],
            "current-context": "e2e",
        }
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        path.chmod(0o600)
        return path

    def token(self, user: str) -> str:
        """The static token of `user` (admin, system:node:localhost, ...)."""
        return self._tokens[user]

    @property
    def port(self) -> int:
        return int(self.server.rsplit(":", 1)[1])

    def api_client(self, token: str) -> kubernetes.client.ApiClient:
        conf = kubernetes.client.Configuration()
        conf.host = self.server
        conf.ssl_ca_cert = str(self._pki.ca_crt)
        conf.api_key = {"authorization": token}
        conf.api_key_prefix = {"authorization": "Bearer"}
        return kubernetes.client.ApiClient(conf)

    def admin_api_client(self) -> kubernetes.client.ApiClient:
        return self.api_client(self.admin_token)

    def service_account_token(
        self, namespace: str, name: str, create: bool = True, expiration_seconds: int = 3600
    ) -> str:
        """A bound token for the ServiceAccount (TokenRequest API); creates the namespace
        and the ServiceAccount first unless create=False."""
        with self.admin_api_client() as admin:
            core = kubernetes.client.CoreV1Api(admin)
            made = ((core.create_namespace, {"metadata": {"name": namespace}}),
                    (partial(core.create_namespaced_service_account, namespace),
                     {"metadata": {"name": name}}))  # fmt: skip
            for make, body in made if create else ():
                try:
                    make(body)
                except kubernetes.client.ApiException as exc:
                    if exc.status != 409:  # there already: fine
                        raise
            req = kubernetes.client.AuthenticationV1TokenRequest(
                spec=kubernetes.client.V1TokenRequestSpec(
                    audiences=[], expiration_seconds=expiration_seconds
                )
            )
            out = core.create_namespaced_service_account_token(name, namespace, req)
            assert out.status is not None, out
            return str(out.status.token)

    def client_for_service_account(
        self, namespace: str, name: str, create: bool = True
    ) -> kubernetes.client.ApiClient:
        """An ApiClient that authenticates as system:serviceaccount:<namespace>:<name>."""
        return self.api_client(self.service_account_token(namespace, name, create=create))

    # -------------------------------------------------------------- apply

    def apply_yaml(
        self,
        source: str | Path | Iterable[Mapping[str, Any]],
        namespace: str | None = None,
        timeout: float = 30.0,
    ) -> list[dict[str, Any]]:
        """server_side_apply as the admin; API warnings go to self.apply_warnings."""
        with self.admin_api_client() as client:
            return server_side_apply(client, source, namespace, timeout, self.apply_warnings)


def _http_ok(url: str, ctx: ssl.SSLContext | None = None, token: str | None = None) -> Any:
    req = urllib.request.Request(url)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
            body = resp.read(4096).decode(errors="replace")
            return resp.status == 200, body.strip()
    except urllib.error.HTTPError as exc:
        return False, f"HTTP {exc.code}: {exc.read(2048).decode(errors='replace').strip()}"
    except (OSError, ssl.SSLError) as exc:
        return False, str(exc)
