"""Benchmark: our fine-tuning setup against plain ``Trainer`` defaults, side by side.

Same model, data (RTE train from the data root, else synthetic sentence pairs),
batch size and number of steps for every variant; each variant trains a fresh
copy of the same initial weights with the same seed.

* ``plain``: ``TrainingArguments`` defaults: fp32, every example padded to
  ``max_length`` (the usual ``padding="max_length"`` preprocessing).
* ``ours``: what :func:`harness.finetune.train.run_finetune` uses on this
  machine (:func:`runtime_settings`): dynamic padding, bf16/fp16 + TF32 on a GPU,
  the chosen optimizer; plus single-option variants so that each choice is
  measured, not assumed (length grouping, the other AdamW implementation,
  fp32 on a GPU), and ``ours`` without the efficiency tracker: its overhead,
  from ``--repeats`` interleaved with/without pairs (default 3; 1 with
  ``--quick``), reported as the median and range of the pairs' differences.

Printed per variant: samples/s, tokens/s (real, non-padding tokens; and the
padded tokens the model actually computed), peak memory (GPU: torch's peak
allocation; CPU: not measured), energy per 1000 samples (codecarbon/NVML via
:class:`harness.energy.tracker.EfficiencyTracker`), and the training loss. Sanity
check: ``plain`` and ``ours`` see the same examples in the same order, so
their losses must agree (exactly up to float error in fp32; loosely in bf16).

    python scripts/bench_finetune.py            # CPU small model (+ bert-base shape on a GPU when present)
    python scripts/bench_finetune.py --quick    # fewer steps, CPU only
    python scripts/bench_finetune.py --json     # every measured value as one JSON document on stdout
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


@dataclass
class Variant:
    name: str
    pad_to_max: bool
    precision: str  # fp32 | bf16 | fp16
    optim: str
    tf32: bool = False
    group_by_length: bool = False
    track: bool = True


def _texts(task: str, data_root: Path | None, n: int) -> tuple[list[str], list[str] | None, list[int], str]:
    from harness.finetune.tasks import load_task

    if data_root is not None:
        try:
            data = load_task(task, data_root, max_train_samples=n)
            return data.train.text_a, data.train.text_b, data.train.label, f"{task} train (first {len(data.train)})"
        except Exception as exc:  # not under that root: fall back to synthetic data
            print(f"({task} not loadable from {data_root}: {exc}; using synthetic pairs)")
    import random

    rng = random.Random(0)
    words = "the a model learns energy cost of training language data over seeds and tasks GPU".split()
    a = [" ".join(rng.choices(words, k=rng.randint(5, 60))) for _ in range(n)]
    b = [" ".join(rng.choices(words, k=rng.randint(3, 15))) for _ in range(n)]
    return a, b, [rng.randint(0, 1) for _ in range(n)], f"synthetic pairs ({n})"


def _config(shape: str, vocab: int, pad_id: int) -> Any:
    from transformers import BertConfig

    if shape == "bert-base":  # bert-base-uncased's shape, randomly initialised (no download)
        return BertConfig(vocab_size=30522, num_labels=2, pad_token_id=pad_id)
    return BertConfig(vocab_size=vocab, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                      intermediate_size=512, num_labels=2, pad_token_id=pad_id)


def run_variant(v: Variant, *, shape: str, tokenizer: Any, pairs: Any, state: dict[str, Any], steps: int,
                batch_size: int, max_length: int, warmup: int, device: str) -> dict[str, Any]:
    import torch
    from transformers import (
        BertForSequenceClassification,
        DataCollatorWithPadding,
        Trainer,
        TrainerCallback,
        TrainingArguments,
        default_data_collator,
        set_seed,
    )

    from harness.energy.tracker import EfficiencyTracker
    from harness.finetune.callbacks import EfficiencyCallback
    from harness.finetune.tasks import Split
    from harness.finetune.train import _tokenize

    set_seed(0)
    ds = _tokenize(Split(*pairs), tokenizer, max_length, pad_to_max=v.pad_to_max)
    model = BertForSequenceClassification(_config(shape, len(tokenizer), tokenizer.pad_token_id))
    model.load_state_dict(state)
    counts: list[tuple[int, int]] = []
    base = default_data_collator if v.pad_to_max else DataCollatorWithPadding(tokenizer)

    def collate(features: list[dict[str, Any]]) -> Any:
        batch = base(features)
        counts.append((int(batch["attention_mask"].sum()), int(batch["input_ids"].numel())))
        return batch

    marks: dict[str, float] = {}

    class Clock(TrainerCallback):
        def on_step_end(self, args: Any, st: Any, control: Any, **kw: Any) -> None:
            if st.global_step == warmup:
                if device == "cuda":
                    torch.cuda.synchronize()
                marks["t0"] = time.perf_counter()

        def on_train_end(self, args: Any, st: Any, control: Any, **kw: Any) -> None:
            if device == "cuda":
                torch.cuda.synchronize()
            marks["t1"] = time.perf_counter()

    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    callbacks: list[Any] = [Clock()]
    tracker = None
    if v.track:
        tracker = EfficiencyTracker(cuda_devices=[0] if device == "cuda" else [], measure_power_secs=5)
        callbacks.append(EfficiencyCallback(tracker))
    with tempfile.TemporaryDirectory() as out:
        kwargs: dict[str, Any] = {
            "output_dir": out, "max_steps": steps, "per_device_train_batch_size": batch_size,
            "learning_rate": 2e-5, "weight_decay": 0.01, "save_strategy": "no", "eval_strategy": "no",
            "logging_strategy": "no", "report_to": "none", "disable_tqdm": True, "seed": 0, "data_seed": 0,
            "use_cpu": device == "cpu", "optim": v.optim,
            "bf16": v.precision == "bf16", "fp16": v.precision == "fp16",
            "train_sampling_strategy": "group_by_length" if v.group_by_length else "random",
        }
        if v.tf32:
            kwargs["tf32"] = True
        trainer = Trainer(model=model, args=TrainingArguments(**kwargs), train_dataset=ds,
                          data_collator=collate, callbacks=callbacks)
        result = trainer.train()
    if device == "cuda":
        import torch as _t

        _t.backends.cuda.matmul.allow_tf32 = False  # do not leak TF32 into the next variant
        _t.backends.cudnn.allow_tf32 = False
    timed = counts[warmup:steps] if len(counts) >= steps else counts[warmup:]
    seconds = marks["t1"] - marks["t0"]
    samples = (steps - warmup) * batch_size
    eff = tracker.result if tracker is not None else None
    return {
        "variant": v.name,
        "samples_s": samples / seconds,
        "tokens_s": sum(c[0] for c in timed) / seconds,
        "padded_tokens_s": sum(c[1] for c in timed) / seconds,
        "peak_mem_gib": (torch.cuda.max_memory_allocated() / 2**30) if device == "cuda" else None,
        "kwh_per_1000": (eff["energy_kwh"] / (steps * batch_size) * 1000) if eff else None,
        "backend": eff["backend"] if eff else "-",
        "loss": float(result.training_loss),
        "seconds": seconds,
    }


def bench(shape: str, device: str, *, task: str, steps: int, warmup: int, batch_size: int, max_length: int,
          data_root: Path | None, quick: bool, repeats: int = 1) -> dict[str, Any]:
    """Every variant once, then ``ours`` with and without the tracker ``repeats`` times, interleaved."""
    import statistics

    import torch
    from transformers import BertForSequenceClassification, set_seed

    from harness.finetune.train import runtime_settings
    from harness.models import load_tokenizer

    n = steps * batch_size
    a, b, y, source = _texts(task, data_root, n)
    tokenizer = load_tokenizer("tiny:bert", texts=a + (b or []))
    set_seed(0)
    state = BertForSequenceClassification(_config(shape, len(tokenizer), tokenizer.pad_token_id)).state_dict()
    state = {k: t.clone() for k, t in state.items()}
    ours = runtime_settings("auto")
    other_optim = "adamw_torch" if ours["optim"] == "adamw_torch_fused" else "adamw_torch_fused"
    plain_v = Variant("plain Trainer defaults", True, "fp32", "adamw_torch_fused")
    ours_v = Variant("ours", False, ours["precision"], ours["optim"], tf32=ours["tf32"])
    untracked_v = Variant("ours, no tracker", False, ours["precision"], ours["optim"], tf32=ours["tf32"], track=False)
    variants = [plain_v, ours_v, untracked_v]
    if not quick:
        variants.append(Variant(f"ours, optim={other_optim}", False, ours["precision"], other_optim,
                                tf32=ours["tf32"]))
        variants.append(Variant("ours + group_by_length", False, ours["precision"], ours["optim"],
                                tf32=ours["tf32"], group_by_length=True))
    if device == "cuda":
        variants.append(Variant("ours in fp32 (no bf16/TF32)", False, "fp32", ours["optim"]))
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "none"
    print(f"\n== {shape}-shaped BERT on {device} (GPU: {gpu}); data: {source}; batch {batch_size}, "
          f"max_length {max_length}, {steps} steps ({warmup} warm-up steps not timed); "
          f"ours = {ours['precision']}, tf32={ours['tf32']}, {ours['optim']}, dynamic padding")
    common = {"shape": shape, "tokenizer": tokenizer, "pairs": (a, b, y), "state": state, "steps": steps,
              "batch_size": batch_size, "max_length": max_length, "warmup": warmup, "device": device}
    rows = []
    for v in variants:
        rows.append(run_variant(v, **common))
        _print_row(rows[-1])
    plain, mine, untracked = rows[0], rows[1], rows[2]
    # the tracker's overhead: "ours" with and without it, interleaved, so that drift hits both alike
    overheads = [100 * (untracked["samples_s"] / mine["samples_s"] - 1)]
    for _ in range(repeats - 1):
        tracked_again, untracked_again = run_variant(ours_v, **common), run_variant(untracked_v, **common)
        overheads.append(100 * (untracked_again["samples_s"] / tracked_again["samples_s"] - 1))
    speedup = mine["samples_s"] / plain["samples_s"]
    print(f"speed-up of ours over plain: {speedup:.2f}x samples/s; "
          f"with vs without tracker: median {statistics.median(overheads):+.1f}% over {len(overheads)} interleaved "
          f"pair(s) (range {min(overheads):+.1f}% to {max(overheads):+.1f}%; timing noise on a busy machine is "
          "several %)")
    tol = 1e-3 if ours["precision"] == "fp32" else 5e-2
    diff = abs(plain["loss"] - mine["loss"])
    ok = diff <= tol * max(1.0, abs(plain["loss"]))
    print(f"sanity: training loss plain {plain['loss']:.6f} vs ours {mine['loss']:.6f} (|diff| {diff:.2e}, "
          f"tolerance {tol:g}): {'OK' if ok else 'MISMATCH'}")
    result = {
        "shape": shape, "device": device, "gpu": gpu, "data": source, "batch_size": batch_size,
        "max_length": max_length, "steps": steps, "warmup": warmup, "ours": ours, "rows": rows,
        "speedup_ours_over_plain": speedup,
        "tracker_overhead_pct": overheads,
        "sanity": {"plain_loss": plain["loss"], "ours_loss": mine["loss"], "abs_diff": diff, "tolerance": tol,
                   "ok": ok},
    }
    if not ok:
        raise SystemExit("plain and ours disagree on the training loss")
    return result


def _print_row(r: dict[str, Any]) -> None:
    mem = f"{r['peak_mem_gib']:.2f}" if r["peak_mem_gib"] is not None else "-"
    kwh = f"{r['kwh_per_1000'] * 1000:.4f}" if r["kwh_per_1000"] is not None else "-"
    print(f"{r['variant']:<34} {r['samples_s']:>9.1f} samples/s {r['tokens_s']:>10.0f} tok/s "
          f"{r['padded_tokens_s']:>10.0f} padded tok/s  peak {mem:>6} GiB  {kwh:>8} Wh/1000 samples "
          f"[{r['backend']}]  loss {r['loss']:.5f}")


def tracker_cost(device: str, measure_power_secs: float = 15.0) -> dict[str, Any]:
    """The tracker's own cost, timed directly: start + stop once per run, one power sample per interval."""
    from harness.energy.tracker import EfficiencyTracker

    tracker = EfficiencyTracker(cuda_devices=[0] if device == "cuda" else [], measure_power_secs=measure_power_secs)
    t0 = time.perf_counter()
    tracker.start()
    t1 = time.perf_counter()
    reps = 5
    for _ in range(reps):
        # one background sample; codecarbon 3's private method (pinned in pyproject.toml)
        tracker._cc._measure_power_and_energy() if tracker._cc is not None else None
    t2 = time.perf_counter()
    tracker.stop()
    t3 = time.perf_counter()
    sample = (t2 - t1) / reps
    out = {"backend": tracker.result["backend"], "start_s": t1 - t0, "stop_s": t3 - t2, "sample_s": sample,
           "measure_power_secs": measure_power_secs, "sample_pct_of_run": 100 * sample / measure_power_secs}
    print(f"\ntracker cost ({out['backend']}): start {out['start_s']:.3f} s + stop {out['stop_s']:.3f} s once per "
          f"run; one power sample {1000 * sample:.1f} ms every {measure_power_secs:g} s = "
          f"{out['sample_pct_of_run']:.3f}% of a run's time (plus start/stop: "
          f"{100 * (t1 - t0 + t3 - t2) / 3600:.4f}% of a one-hour run)")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="fewer steps, CPU only (for tests)")
    p.add_argument("--steps", type=int, help="optimizer steps per variant")
    p.add_argument("--repeats", type=int, help="interleaved with/without-tracker pairs (default 1 quick, else 3)")
    p.add_argument("--task", default="sst2", help="GLUE task whose train texts are used (default %(default)s)")
    p.add_argument("--data-root", help="data root with glue/RTE (default $VNR_DATA_ROOT or ../shared/data)")
    p.add_argument("--no-gpu", action="store_true", help="skip the GPU benchmark even where a GPU exists")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document with every measured value on stdout (the table goes to stderr)")
    args = p.parse_args(argv)
    if args.json:
        with contextlib.redirect_stdout(sys.stderr):
            report = run(args)
        print(json.dumps(report, indent=2))
    else:
        run(args)
    return 0


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    import logging

    logging.getLogger("codecarbon").setLevel(logging.ERROR)
    root = args.data_root or os.environ.get("VNR_DATA_ROOT")
    if root is None:
        candidate = Path(__file__).resolve().parents[2] / "shared" / "data"
        root = str(candidate) if candidate.is_dir() else None
    data_root = Path(root) if root else None
    cpu_steps = args.steps or (6 if args.quick else 30)
    repeats = args.repeats or (1 if args.quick else 3)
    results = [bench("small", "cpu", task=args.task, steps=cpu_steps, warmup=2, batch_size=16, max_length=128,
                     data_root=data_root, quick=args.quick, repeats=repeats)]
    gpu = torch.cuda.is_available() and not args.quick and not args.no_gpu
    if gpu:
        for task in (args.task, "rte"):  # short single sentences, then long pairs
            results.append(bench("bert-base", "cuda", task=task, steps=args.steps or 200, warmup=20,
                                 batch_size=16, max_length=128, data_root=data_root, quick=False, repeats=repeats))
    elif not torch.cuda.is_available():
        print("\n(no CUDA GPU here: GPU benchmark skipped)")
    return {"benchmarks": results, "tracker_cost": tracker_cost("cuda" if gpu else "cpu")}


if __name__ == "__main__":
    sys.exit(main())
