"""Run the `ceph`, `rbd` and helper tools against one cluster's conf, with deadlines."""

from __future__ import annotations

import json
import logging
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crimsonbench.errors import ExecutionError, ParseError
from crimsonbench.local.userland import Userland

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 60.0
CONNECT_TIMEOUT = 15  # the CLI's own mon connect limit; below DEFAULT_TIMEOUT on purpose


def run(
    argv: Sequence[str],
    timeout: float = DEFAULT_TIMEOUT,
    stdin: str | None = None,
    env: Mapping[str, str] | None = None,
    userland: Userland | None = None,
) -> str:
    """Run a tool (from `userland`, default this machine), return its stdout. Failures and
    timeouts raise ExecutionError. `env` is added to the environment."""
    cmd = " ".join(argv)
    full, full_env, _ = (userland or Userland()).wrap(argv, env)
    t0 = time.monotonic()
    try:
        res = subprocess.run(
            full,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=full_env,
            check=False,
            # its own session: a Ctrl-C at the terminal reaches us, not the tool we wait
            # for (a teardown's losetup or umount); we kill it if we stop
            start_new_session=True,
        )
    except subprocess.TimeoutExpired:
        raise ExecutionError(f"`{cmd}` did not finish within {timeout:.0f} s") from None
    except FileNotFoundError:
        raise ExecutionError(f"`{argv[0]}` is not installed (needed for `{cmd}`)") from None
    log.debug("%s -> %d in %.2f s", cmd, res.returncode, time.monotonic() - t0)
    if res.returncode != 0:
        err = (res.stderr.strip() or res.stdout.strip())[-2000:]
        raise ExecutionError(f"`{cmd}` failed with exit {res.returncode}: {err}")
    return res.stdout


class Started:
    """A tool started in the background (its own session), its stderr in a temporary
    file: a pipe nobody reads would stall it once full."""

    def __init__(self, argv: Sequence[str], userland: Userland | None = None) -> None:
        self.cmd = " ".join(argv)
        full, env, _ = (userland or Userland()).wrap(argv)
        self._err = tempfile.TemporaryFile()  # noqa: SIM115 - closed by check() or kill()
        try:
            self.proc = subprocess.Popen(full, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=self._err, env=env,
                                         start_new_session=True)  # fmt: skip
        except FileNotFoundError:
            self._err.close()
            raise ExecutionError(
                f"`{argv[0]}` is not installed (needed for `{self.cmd}`)"
            ) from None

    def poll(self) -> int | None:
        return self.proc.poll()

    def check(self, what: str) -> None:
        """ExecutionError naming `what` when it failed (once it has ended)."""
        rc = self.proc.wait()
        self._err.seek(0)
        err = self._err.read()[-2000:].decode(errors="replace").strip()
        self._err.close()
        if rc != 0:
            raise ExecutionError(f"{what}: `{self.cmd}` failed with exit {rc}: {err}")

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._err.close()


@dataclass(frozen=True)
class ClientConf:
    """What a librados client (fio's rbd engine, rbd) needs to reach a cluster.

    fio 3.33: `ioengine=rbd clientname=admin pool=P rbdname=I` with CEPH_CONF in the
    environment. fio calls rados_conf_read_file(NULL), which reads $CEPH_CONF before
    /etc/ceph/ceph.conf; the conf names the keyring, so no other variable is needed.
    """

    conf: Path
    keyring: Path
    user: str = "admin"  # fio's clientname (without "client.")

    @property
    def env(self) -> dict[str, str]:
        return {"CEPH_CONF": str(self.conf)}


class CephCli:
    """The ceph and rbd CLIs bound to one cluster's ceph.conf (which names the keyring)."""

    def __init__(self, conf: Path, userland: Userland | None = None) -> None:
        self.conf = conf
        self.userland = userland or Userland()

    def ceph(self, *args: str, timeout: float = DEFAULT_TIMEOUT, stdin: str | None = None) -> str:
        connect = str(max(1, min(CONNECT_TIMEOUT, int(timeout) - 1)))
        argv = ["ceph", "-c", str(self.conf), "--connect-timeout", connect, *args]
        return run(argv, timeout=timeout, stdin=stdin, userland=self.userland)

    def ceph_json(self, *args: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
        out = self.ceph(*args, "--format", "json", timeout=timeout)
        return parse_json(out, "ceph " + " ".join(args[:2]))

    def set_config(self, config: Mapping[str, Mapping[str, str]]) -> None:
        """Write section -> key -> value into the mon config database.

        One `config assimilate-conf` call instead of a CLI start (~0.2 s) per key. Keys it
        does not take (unknown options, values an ini file cannot carry) are set one by one
        with `config set`, which fails with Ceph's own message naming the option.
        """
        plain = {
            s: {k: str(v) for k, v in o.items() if _ini_safe(k, str(v))} for s, o in config.items()
        }
        if any(plain.values()):
            text = "".join(
                f"[{sec}]\n" + "".join(f"\t{k} = {v}\n" for k, v in opts.items())
                for sec, opts in plain.items()
                if opts
            )
            with tempfile.NamedTemporaryFile("w", dir=self.conf.parent, suffix=".conf") as fh:
                fh.write(text)
                fh.flush()
                rest = self.ceph("config", "assimilate-conf", "-i", fh.name)
            left = _parse_ini(rest)
        else:
            left = {}
        rejected = {(sec, _norm(k)) for sec, opts in left.items() for k in opts}
        for sec, opts in config.items():
            for key, value in opts.items():
                if key not in plain.get(sec, {}) or (sec, _norm(key)) in rejected:
                    self.ceph("config", "set", sec, key, str(value))

    def rbd(self, *args: str, timeout: float = DEFAULT_TIMEOUT) -> str:
        return run(["rbd", "-c", str(self.conf), *args], timeout=timeout, userland=self.userland)

    def rbd_start(self, *args: str) -> Started:
        """`rbd ARGS` in the background (Started.check() once it has ended)."""
        return Started(["rbd", "-c", str(self.conf), *args], self.userland)

    def rbd_json(self, *args: str, timeout: float = DEFAULT_TIMEOUT) -> Any:
        return parse_json(self.rbd(*args, "--format", "json", timeout=timeout), "rbd " + args[0])


def _ini_safe(key: str, value: str) -> bool:
    bad = ("#", ";", "\n", "[", "]", "=")
    return value == value.strip() and not any(c in value or c in key for c in bad)


def _norm(key: str) -> str:
    return key.strip().replace(" ", "_").replace("-", "_").lower()


def _parse_ini(text: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    section = "global"
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif "=" in line:
            key, _, value = line.partition("=")
            out.setdefault(section, {})[key.strip()] = value.strip()
    return out


def parse_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"`{what}` printed no valid JSON ({exc}): {text[:300]!r}") from None
