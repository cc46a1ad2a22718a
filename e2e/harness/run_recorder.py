"""A kind test's BenchmarkRuns, fetched as a user fetches them while they run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from crimsonbench.spec.api import GROUP, PLURAL
from harness.kind import KindCluster


class RunRecorder:
    """Every BenchmarkRun of NAMESPACE fetched with `crimsonbench fetch` (the CLI, as a
    user runs it) each time its phase or stepsDone changes, so that the last fetch of a run
    outlives the run (a test deletes it): `fetched[name]` is that results directory and
    `phases[name]` the phases seen, in order."""

    def __init__(self, kind: KindCluster, namespace: str, dest: Path) -> None:
        self.kind = kind
        self.namespace = namespace
        self.dest = dest
        self.fetched: dict[str, Path] = {}
        self.phases: dict[str, list[str]] = {}
        self.errors: dict[str, str] = {}  # run -> the last failed fetch's output
        self._seen: dict[str, tuple[str, int]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._cli = Path(sys.executable).with_name("crimsonbench")

    def __enter__(self) -> RunRecorder:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _loop(self) -> None:
        while not self._stop.wait(2):
            try:
                listed = self.kind.kubectl("-n", self.namespace, "get", f"{PLURAL}.{GROUP}",
                                           "-o", "json", timeout=60)  # fmt: skip
                runs = json.loads(listed)
            except Exception:  # noqa: S112 - the API may blip; next round
                continue
            for run in runs.get("items", []):
                name = run["metadata"]["name"]
                st = run.get("status") or {}
                now = (str(st.get("phase") or ""), int(st.get("stepsDone") or 0))
                if now == self._seen.get(name):
                    continue
                if not self.phases.get(name) or self.phases[name][-1] != now[0]:
                    self.phases.setdefault(name, []).append(now[0])
                if now[1] == 0 and now[0] not in ("Completed", "Failed"):
                    continue  # nothing to fetch yet
                if self._fetch(name):
                    self._seen[name] = now

    def _fetch(self, name: str) -> bool:
        """Into a fresh directory, which replaces the last fetch only when it succeeded."""
        out, tmp = self.dest / name, self.dest / f".{name}.new"
        shutil.rmtree(tmp, ignore_errors=True)
        proc = subprocess.run(
            [str(self._cli), "fetch", f"{self.namespace}/{name}", "--kubeconfig",
             str(self.kind.kubeconfig), "--results", str(tmp)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            self.errors[name] = f"{proc.stdout[-500:]} {proc.stderr[-500:]}"
            shutil.rmtree(tmp, ignore_errors=True)
            return False
        shutil.rmtree(out, ignore_errors=True)
        tmp.rename(out)
        self.fetched[name] = out
        return True
