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

import contextlib
import ctypes
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import kubernetes.client
import kubernetes.dynamic
import kubernetes.dynamic.exceptions
import trustme
import yaml

from harness.builds import REPO, cache_root, run_build

BUILD_SCRIPT = REPO / "e2e" / "build-k8s-binaries.sh"
K8S_VERSION = "v1.36.3"
REQUIRED = ("etcd", "kube-apiserver", "kube-controller-manager")
FIELD_MANAGER = "crimsonbench-e2e"
SERVICE_CIDR = "10.96.0.0/24"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"


class BinariesUnavailable(RuntimeError):
    """The control-plane binaries are not built and cannot be built on this machine."""


class NotReadyError(RuntimeError):
    """A component did not become ready in time (the message names it and shows its log)."""


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


# ------------------------------------------------------------------ PKI


@dataclass(frozen=True)
class _Pki:
    """trustme's CAs and leaves, written as files for the components' flags."""

    ca_crt: Path
    ca_key: Path  # kube-controller-manager signs CSRs with it (kubelet certificates)
    apiserver_crt: Path
    apiserver_key: Path
    front_proxy_ca_crt: Path
    front_proxy_client_crt: Path
    front_proxy_client_key: Path
    sa_key: Path  # ECDSA: the API server signs and checks service account tokens with it


def _make_pki(d: Path) -> _Pki:
    d.mkdir(mode=0o700)
    files = "ca.crt ca.key apiserver.crt apiserver.key front-proxy-ca.crt front-proxy-client.crt"
    pki = _Pki(*(d / n for n in f"{files} front-proxy-client.key sa.key".split()))
    service_ip = str(next(ipaddress.IPv4Network(SERVICE_CIDR).hosts()))
    parts = ("kubernetes", "default", "svc", "cluster", "local")
    names = [".".join(parts[:n]) for n in (1, 2, 3, 5)]
    ca, front_proxy_ca = trustme.CA(), trustme.CA()
    ca.cert_pem.write_to_path(str(pki.ca_crt))
    ca.private_key_pem.write_to_path(str(pki.ca_key))
    front_proxy_ca.cert_pem.write_to_path(str(pki.front_proxy_ca_crt))
    leaves = (
        (ca.issue_cert("127.0.0.1", service_ip, "localhost", *names, common_name="kube-apiserver"),
         pki.apiserver_crt, pki.apiserver_key),
        # the API server accepts request headers only from this CN (--requestheader-allowed-names)
        (front_proxy_ca.issue_cert(common_name="front-proxy-client"),
         pki.front_proxy_client_crt, pki.front_proxy_client_key),
    )  # fmt: skip
    for leaf, crt, key in leaves:
        leaf.cert_chain_pems[0].write_to_path(str(crt))
        leaf.private_key_pem.write_to_path(str(key))
    ca.issue_cert(common_name="service-accounts").private_key_pem.write_to_path(str(pki.sa_key))
    return pki


# ------------------------------------------------------------------ processes


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(text.splitlines()[-lines:])


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Component:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.proc.poll() is None

    def rss_bytes(self) -> int:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        except OSError:
            pass
        return 0

    def stop(self, grace: float = 10.0) -> None:
        if self.proc.poll() is not None:
            self._reap_group()
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(5)
        self._reap_group()

    def _reap_group(self) -> None:
        # Anything the component forked shares its process group (it is the group leader).
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)


def spawn(name: str, argv: list[str], workdir: Path) -> Component:
    """Start `argv` in its own process group, output in workdir/<name>.log; it dies with us."""
    log = workdir / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            start_new_session=True,  # own process group: killpg reaches all of it
            preexec_fn=_die_with_parent,
        )
    return Component(name, proc, log)


def wait_component(comp: Component, probe: Callable[[], Any], what: str, timeout: float) -> float:
    """Poll `probe` (truthy, or (ok, what it said)) while `comp` runs; the seconds it took.
    NotReadyError with the component's log tail when it exits or `timeout` passes."""
    t0, last = time.monotonic(), "no answer yet"
    while time.monotonic() < t0 + timeout:
        if not comp.alive():
            raise NotReadyError(f"{comp.name} exited with code {comp.proc.returncode} before {what}"
                                f"\n--- tail of {comp.log}:\n{tail(comp.log, 40)}")  # fmt: skip
        try:
            got = probe()
            ok, last = got if isinstance(got, tuple) else (bool(got), last)
        except Exception as exc:  # not up yet
            ok, last = False, f"{type(exc).__name__}: {exc}"
        if ok:
            return time.monotonic() - t0
        time.sleep(0.1)
    raise NotReadyError(f"{comp.name} is not ready after {timeout:.0f}s: {what} said {last!r}"
                        f"\n--- tail of {comp.log}:\n{tail(comp.log, 40)}")  # fmt: skip


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
    _pki: _Pki = field(init=False)
    _tokens: dict[str, str] = field(init=False, default_factory=dict)

    # -------------------------------------------------------------- lifecycle

    def start(self) -> None:
        t0 = time.monotonic()
        if self.bin_dir is None:
            self.bin_dir = ensure_binaries()
        self.dir = Path(tempfile.mkdtemp(prefix="crimsonbench-k8s-"))
        try:
            self._pki = _make_pki(self.dir / "pki")
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
            if create:
                _create_ignoring_conflict(
                    core.create_namespace,
                    kubernetes.client.V1Namespace(
                        metadata=kubernetes.client.V1ObjectMeta(name=namespace)
                    ),
                )
                _create_ignoring_conflict(
                    core.create_namespaced_service_account,
                    namespace,
                    kubernetes.client.V1ServiceAccount(
                        metadata=kubernetes.client.V1ObjectMeta(name=name)
                    ),
                )
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


def _create_ignoring_conflict(create: Any, *args: Any) -> None:
    try:
        create(*args)
    except kubernetes.client.ApiException as exc:
        if exc.status != 409:
            raise


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
