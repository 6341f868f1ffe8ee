"""Benchmark the grid's run store guarantees against the straightforward way, on the same records.

1. **Concurrent writers, one store** (what many SLURM array tasks do): W processes
   each write their share of R records (~``--kb`` KB each) while a reader process
   re-reads them in a loop. Ours: ``RunStore.write`` (temp file, fsync, rename).
   Straightforward: ``open(path, "w").write(json)``. Reported: records/s and the
   torn reads the reader saw (a file it could not parse), i.e. what ``vnr collect``
   or a skip check would have seen mid-write.
2. **Per-spec overhead of the executor guard** (skip check, lock, running
   marker, done check) around a no-op run function, against calling it directly.

Sanity check: both ways end with the same records on disk.

    python scripts/bench_grid.py            # ~1 minute on 2 cores
    python scripts/bench_grid.py --quick    # a few seconds
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import tempfile
import time
from pathlib import Path

from harness.grid.local import run_spec
from harness.specs import FinetuneSpec
from harness.store import SCHEMA_VERSION, RunStore


def _record(i: int, kb: int) -> dict:
    return {"run_id": f"finetune-bench-s{i}", "status": "ok", "metrics": {"accuracy": i / 1000},
            "history": [{"epoch": e, "loss": 1.0 / (e + 1)} for e in range(5)], "payload": "x" * (kb * 1024)}


def _write_ours(root: str, ids: list[int], kb: int) -> None:
    store = RunStore(root)
    for i in ids:
        store.write(_record(i, kb))


def _write_naive(root: str, ids: list[int], kb: int) -> None:
    runs = Path(root) / "runs"
    for i in ids:
        rec = {"schema": SCHEMA_VERSION, **_record(i, kb)}
        with open(runs / f"{rec['run_id']}.json", "w") as fh:
            fh.write(json.dumps(rec, indent=2) + "\n")


def _reader(root: str, stop, torn, reads) -> None:
    runs = Path(root) / "runs"
    n_torn = n = 0
    while not stop.is_set():
        for path in runs.glob("*.json"):
            try:
                json.loads(path.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                n_torn += 1
            except FileNotFoundError:
                pass
            n += 1
    torn.value, reads.value = n_torn, n


def concurrent_writes(writer, n_records: int, n_writers: int, kb: int, rounds: int) -> tuple[float, int, int, Path]:
    ctx = multiprocessing.get_context("fork")
    root = Path(tempfile.mkdtemp(prefix="bench-grid-"))
    (root / "runs").mkdir()
    stop, torn, reads = ctx.Event(), ctx.Value("i", 0), ctx.Value("i", 0)
    reader = ctx.Process(target=_reader, args=(str(root), stop, torn, reads))
    reader.start()
    started = time.perf_counter()
    for _ in range(rounds):  # rewrite the same ids: readers meet files being replaced
        shares = [list(range(w, n_records, n_writers)) for w in range(n_writers)]
        procs = [ctx.Process(target=writer, args=(str(root), share, kb)) for share in shares]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
    elapsed = time.perf_counter() - started
    stop.set()
    reader.join()
    return n_records * rounds / elapsed, torn.value, reads.value, root


def guard_overhead(n: int, root: Path) -> tuple[float, float]:
    specs = [FinetuneSpec("tiny:bert", "rte", seed) for seed in range(n)]

    def noop(spec, output, **_):
        rec = {"run_id": spec.run_id(), "status": "ok"}
        RunStore(output).write(rec)
        return rec

    started = time.perf_counter()
    for spec in specs:
        noop(spec, root / "direct")
    direct = (time.perf_counter() - started) / n
    started = time.perf_counter()
    for spec in specs:
        run_spec(spec, root / "guarded", runner=noop)
    guarded = (time.perf_counter() - started) / n
    return direct, guarded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a few seconds)")
    parser.add_argument("--records", type=int, default=None)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument("--kb", type=int, default=256, help="size of one record in KB")
    args = parser.parse_args()
    n = args.records or (40 if args.quick else 200)
    rounds = 2 if args.quick else 5
    print(f"1. {args.writers} writer processes, {n} records of ~{args.kb} KB, {rounds} rounds, one concurrent reader")
    results = {}
    for name, writer in (("ours (temp+fsync+rename)", _write_ours), ("naive (open/write)", _write_naive)):
        rate, torn, reads, root = concurrent_writes(writer, n, args.writers, args.kb, rounds)
        results[name] = root
        print(f"   {name:<26} {rate:8.0f} records/s   torn reads {torn:5d} of {reads}")
    ours, naive = (sorted((r / "runs").glob("*.json")) for r in results.values())
    same = [p.name for p in ours] == [p.name for p in naive] and all(
        json.loads(a.read_text()) == json.loads(b.read_text()) for a, b in zip(ours, naive)
    )
    print(f"   sanity: both stores end with the same {len(ours)} records: {'yes' if same else 'NO'}")
    assert same, "the two ways disagree"

    m = 50 if args.quick else 300
    guard_root = Path(tempfile.mkdtemp(prefix="bench-guard-"))
    direct, guarded = guard_overhead(m, guard_root)
    print(f"2. executor guard around a no-op run ({m} specs): direct {direct * 1e3:.2f} ms/spec, "
          f"guarded {guarded * 1e3:.2f} ms/spec (+{(guarded - direct) * 1e3:.2f} ms: skip check, lock, marker)")
    print(f"   (cpu count {os.cpu_count()}; a fine-tuning run takes minutes, so the guard is noise)")
    for root in [*results.values(), guard_root]:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
