"""Two real nodes (kind: e2e/harness/kind_bench.py): start skew between the fio clients and
the per-step overhead of the client/server design, with Rook's OSDs and a fio client on
each worker.

- start skew: per step, the latest minus the earliest client start (fio's own IOPS logs,
  the product's StepResult.start_skew_ms). Goal < 50 ms.
- overhead per step: wall time between two consecutive steps being stored (status.stepsDone
  going up, polled every 0.2 s) minus runtime + ramp: the exec that starts the step's fio
  client in the run's driver pod, fio's client handing the job files to both servers and
  their librbd setup, fio's end, the exec that reads the output, parse, results write,
  and the status patch. Goal < 1.5 s. The first step is left
  out (its interval starts with the prefill).
- once per run: apply -> first step stored (patch, Rook rolling both OSDs, fio servers,
  prefill); last step stored -> Completed (the restore: spec back, Rook rolling the OSDs
  back, `ceph config rm`, pool and user removed); Completed -> the run gone after delete.

    .venv/bin/python bench/bench_kind.py [--rounds 2] [--runtime 5]
        [--compare-fio-archive ARCHIVE [--compare-fio-tag stock]]

One patch of images/fio/ measured alone: `bench/build_fio_variant.sh 0002` prints the
archive of our runner without it (tag dev-ceph20.2.4-without-0002), then
`--compare-fio-archive ARCHIVE --compare-fio-tag dev-ceph20.2.4-without-0002`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "e2e"))

import kubernetes.client  # noqa: E402
import kubernetes.config  # noqa: E402
from harness.kind_bench import RUN_NS, kind_bench_stack, run_manifest, switch_fio_image  # noqa: E402

from crimsonbench.manifests.naming import dns_name  # noqa: E402
from crimsonbench.manifests.results import read_stored, results_selector  # noqa: E402
from crimsonbench.spec.api import GROUP, PLURAL, VERSION  # noqa: E402
from crimsonbench.spec.names import MAX_RUN_NAME  # noqa: E402

IODEPTHS = (1, 8, 32)


def one_run(custom: Any, core: Any, api: Any, name: str, workers: list[str],
            runtime: int) -> dict[str, Any]:  # fmt: skip
    body = run_manifest(name, workers, f"pool-{name}", IODEPTHS, runtime)
    t0 = time.monotonic()
    custom.create_namespaced_custom_object(GROUP, VERSION, RUN_NS, PLURAL, body)
    stored: list[float] = []  # monotonic time each step was seen stored
    done, phase = 0, ""
    while phase not in ("Completed", "Failed"):
        if time.monotonic() - t0 > 3600:
            raise RuntimeError(f"{name}: not finished after an hour")
        st = custom.get_namespaced_custom_object(GROUP, VERSION, RUN_NS, PLURAL, name)
        status = st.get("status") or {}
        phase = status.get("phase", "")
        now = int(status.get("stepsDone") or 0)
        stored += [time.monotonic()] * (now - done)
        done = now
        time.sleep(0.2)
    if phase != "Completed":
        raise RuntimeError(f"{name}: {phase}: {status.get('message')}")
    finished = time.monotonic()
    cms = core.list_namespaced_config_map(RUN_NS, label_selector=results_selector(name)).items
    results = read_stored([api.sanitize_for_serialization(c) for c in cms]).results
    custom.delete_namespaced_custom_object(GROUP, VERSION, RUN_NS, PLURAL, name)
    while True:
        try:
            custom.get_namespaced_custom_object(GROUP, VERSION, RUN_NS, PLURAL, name)
        except kubernetes.client.ApiException as exc:
            if exc.status == 404:
                break
            raise
        time.sleep(0.5)
    intervals = [b - a for a, b in zip(stored, stored[1:], strict=False)]
    return {
        "first_step_s": stored[0] - t0,
        "overheads": [i - runtime - 1 for i in intervals],
        "skews": [r.start_skew_ms for r in results if r.start_skew_ms is not None],
        # the fio client's own wall (driver: start -> end) beyond runtime + ramp: connecting
        # to both servers, their librbd setup, fio's end; the rest of the overhead is ours
        "fio_extra": [
            float(r.extra["wall_seconds"]) - runtime - 1
            for r in results
            if r.extra.get("wall_seconds")
        ],  # fmt: skip
        "clients": [len(r.clients) for r in results],
        "restore_s": finished - stored[-1],
        "delete_s": time.monotonic() - finished,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--runtime", type=int, default=5)
    ap.add_argument(
        "--compare-fio-archive",
        type=Path,
        metavar="ARCHIVE",
        help="another fio runner image (a docker-archive of FIO_IMAGE's repository at the tag "
        "--compare-fio-tag, e.g. one with Debian's stock fio): every round runs both images, "
        "in alternating order, the operator switched between them",
    )
    ap.add_argument("--compare-fio-tag", default="stock")
    args = ap.parse_args()
    extra = [args.compare_fio_archive] if args.compare_fio_archive else []
    with kind_bench_stack(extra_archives=extra) as s:
        print(f"stack up: {s.timings}", flush=True)
        # ours: the tag the stack installed (dev, or dev-ceph<X> for a Rook on Ceph 20+)
        variants = {s.fio_tag: f"ours (images/fio, {s.fio_tag})"}
        if args.compare_fio_archive:
            name = args.compare_fio_archive.name
            variants[args.compare_fio_tag] = f"{args.compare_fio_tag} ({name})"
        rows: dict[str, list[dict[str, Any]]] = {tag: [] for tag in variants}
        api: Any = kubernetes.config.new_client_from_config(str(s.kind.kubeconfig))
        custom, core = kubernetes.client.CustomObjectsApi(api), kubernetes.client.CoreV1Api(api)
        workers = sorted(s.kind.workers)
        current = s.fio_tag
        for r in range(args.rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            for tag in order:
                if tag != current:
                    switch_fio_image(s, tag)
                    current = tag
                name = dns_name("kind-bench", str(r), tag, max_len=MAX_RUN_NAME)
                row = one_run(custom, core, api, name, workers, args.runtime)
                rows[tag].append(row)
                print(f"round {r} {tag}: first step {row['first_step_s']:.0f} s, overhead/step "
                      + " ".join(f"{o:.2f}" for o in row["overheads"]) + " s (fio's own "
                      + " ".join(f"{o:.2f}" for o in row["fio_extra"]) + " s), skew "
                      + " ".join(f"{k:.0f}" for k in row["skews"]) + " ms, clients "
                      + f"{row['clients']}, restore {row['restore_s']:.0f} s, "
                      + f"delete {row['delete_s']:.0f} s", flush=True)  # fmt: skip
    for tag, what in variants.items():
        report(f"fio image {what}", rows[tag])


def report(title: str, rows: list[dict[str, Any]]) -> None:
    overheads = [o for row in rows for o in row["overheads"]]
    skews = [k for row in rows for k in row["skews"]]
    print(f"\n{title}, {len(rows)} runs\n\n| figure | median | min | max | goal |")
    print("|---|---|---|---|---|")
    print(f"| start skew between 2 clients (ms) | {statistics.median(skews):.0f} | {min(skews):.0f}"
          f" | {max(skews):.0f} | < 50 |")  # fmt: skip
    print(f"| overhead per step (s) | {statistics.median(overheads):.2f} | {min(overheads):.2f}"
          f" | {max(overheads):.2f} | < 1.5 |")  # fmt: skip
    fio_extra = [o for row in rows for o in row["fio_extra"]]
    print(f"| of which fio's own start + end (s) | {statistics.median(fio_extra):.2f} | "
          f"{min(fio_extra):.2f} | {max(fio_extra):.2f} | — |")  # fmt: skip
    for key, what in (
        ("first_step_s", "apply -> first step stored"),
        ("restore_s", "last step stored -> Completed (restore)"),
    ):
        vals = [row[key] for row in rows]
        print(f"| {what} (s) | {statistics.median(vals):.0f} | {min(vals):.0f}"
              f" | {max(vals):.0f} | — |")  # fmt: skip


if __name__ == "__main__":
    main()
