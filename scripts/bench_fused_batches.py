"""How long a fused group's step batch takes to build on the host: ours (``PaddedRows.batch``: the run's examples
padded once, each step a gather; on a GPU the mask is built there, here on the CPU like the rest) beside the straightforward way (``stack_batches``: each step's examples copied one
by one), measured side by side in one process, in alternating rounds.

A launch-bound GPU waits for the host between steps (the training loop reads each step's losses), so a batch
built in milliseconds is time the device idles; a captured step (one replayed graph) leaves that host time as
the largest part of a step.

    python scripts/bench_fused_batches.py                  # SST-2 texts, K = 1, 2, 5, 10, batch 16, 200 steps
    python scripts/bench_fused_batches.py --task rte --static --json

The examples are the task's training texts tokenized by the tiny BERT tokenizer (trained on them, as a tiny run
does) at max_length 128; each step draws ``K`` runs' batches in their seeds' orders, as ``train_group`` does.
Every round also checks that both ways give the same tensors (``--json``: ``"same": true``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _rows(task: str, data_root: Path | None, n: int) -> list[dict]:
    from harness.finetune.tasks import get_task, load_task
    from harness.finetune.train import TINY_TOKENIZER_TEXTS, _tokenize
    from harness.models import load_tokenizer

    data = load_task(get_task(task), data_root, max_train_samples=n)
    tokenizer = load_tokenizer("tiny:bert", texts=data.train.texts()[:TINY_TOKENIZER_TEXTS])
    return [dict(r) for r in _tokenize(data.train, tokenizer, 128)]


def bench(rows: list[dict], k: int, *, steps: int, batch: int, static: bool) -> dict:
    import torch

    from harness.finetune import fused

    source = fused.PaddedRows(rows, pad_id=0)
    ceiling = max(len(r["input_ids"]) for r in rows)
    orders = [fused.epoch_order(len(rows), seed, 0) for seed in range(k)]
    per_epoch = len(rows) // batch
    picks = [[order[(s % per_epoch) * batch:(s % per_epoch + 1) * batch] for order in orders] for s in range(steps)]

    def shape(p: list[list[int]]) -> dict:
        if not static:
            return {}
        longest = max(len(rows[i]["input_ids"]) for pick in p for i in pick)
        return {"width": fused.static_width(longest, ceiling), "size": batch}

    def ours() -> float:
        t = time.perf_counter()
        for p in picks:
            source.batch(p, causal=False, **shape(p))
        return (time.perf_counter() - t) / steps

    def straightforward() -> float:
        t = time.perf_counter()
        for p in picks:
            fused.stack_batches([[rows[i] for i in pick] for pick in p], 0, causal=False, **shape(p))
        return (time.perf_counter() - t) / steps

    times: dict[str, list[float]] = {"ours": [], "straightforward": []}
    for r in range(3):
        for name, fn in ((("ours", ours), ("straightforward", straightforward)) if r % 2 == 0
                         else (("straightforward", straightforward), ("ours", ours))):
            times[name].append(fn())
    def equal(p: list[list[int]]) -> bool:
        got = source.batch(p, causal=False, **shape(p))
        want = fused.stack_batches([[rows[i] for i in pick] for pick in p], 0, causal=False, **shape(p))
        return set(got) == set(want) and all(torch.equal(got[key], want[key]) for key in want)

    same = all(equal(p) for p in picks[:20])
    med = {name: statistics.median(v) for name, v in times.items()}
    return {"k": k, "batch": batch, "static": static, "steps": steps, "ms_per_step": {n: v * 1000 for n, v in med.items()},
            "rounds_ms": {n: [x * 1000 for x in v] for n, v in times.items()},
            "speedup": med["straightforward"] / med["ours"], "same": same}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="sst2")
    p.add_argument("--fuse", default="1,2,5,10", help="group sizes K, comma-separated (default %(default)s)")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--static", action="store_true", help="static shapes (a captured step's batches)")
    p.add_argument("--data-root", default=os.environ.get("VNR_DATA_ROOT"))
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    try:
        ks = [int(x) for x in args.fuse.split(",") if x.strip()]
    except ValueError:
        ks = []
    if not ks or min(ks) < 1 or args.steps < 1 or args.batch_size < 1:
        p.error("--fuse: group sizes K >= 1, comma-separated; --steps and --batch-size positive")
    import torch

    from ranking.floor.paths import resolve_data_root

    torch.set_num_threads(1)
    rows = _rows(args.task, resolve_data_root(args.data_root), max(args.batch_size * 40, 2000))
    results = [bench(rows, k, steps=args.steps, batch=args.batch_size, static=args.static) for k in ks]
    if args.json:
        print(json.dumps({"task": args.task, "examples": len(rows), "results": results}, indent=2))
        return 0
    print(f"{args.task}: {len(rows)} examples, batch {args.batch_size}, {args.steps} steps x 3 alternating rounds, "
          f"{'static shapes' if args.static else 'bucketed widths'}; host ms per step (median of rounds)")
    for r in results:
        print(f"K={r['k']:<3} ours {r['ms_per_step']['ours']:7.3f} ms   straightforward "
              f"{r['ms_per_step']['straightforward']:7.3f} ms   {r['speedup']:5.1f}x   same tensors: {r['same']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
