"""Benchmark: several fine-tuning runs side by side on one GPU, and what the paper grid would then cost.

For N = 1, 2, 4, 8 (``--packing``) it starts N worker processes on the one GPU,
each training the same model shape (``--shape``: ``bert-base`` or ``gpt2``,
randomly initialised, no download) on the first ``steps × batch`` examples of a
GLUE task with our defaults (:func:`harness.finetune.train.runtime_settings`,
dynamic padding), and beside them plain ``Trainer`` defaults (fp32, padding to
``max_length``) at N = 1. The workers wait for each other after their warm-up
steps, then all time the same number of steps. Per configuration it reports:

* aggregate samples/s (all workers' timed samples / the time from the common
  start to the last worker's end) and the speed-up over plain Trainer at N = 1;
* GPU utilisation (NVML's per-device utilisation, polled by this process,
  averaged over the timed window; what ``nvidia-smi dmon`` shows as SM %);
* Wh per 1000 samples (the GPU counter over the timed window / timed samples);
* the energy check: each worker's tracker attributes its part of the GPU's
  energy through the ledger (:mod:`harness.energy.ledger`); the sum of the N
  attributed energies against what the GPU's counter measured while any of them
  ran (target: within 5 %).

Then it projects the paper grid (7 models × 9 GLUE tasks × 5 seeds × 5 epochs,
GLUE train sizes in :data:`GLUE_TRAIN_SIZES`) in GPU-hours from the best
measured aggregate throughput (:func:`project_grid`): training samples only,
evaluation not counted, every encoder model costed at the measured base-size
shape (DistilBERT/DistilRoBERTa are cheaper, DeBERTa dearer).

Without a CUDA GPU it prints one line and exits 0 (``--cpu`` runs the same
orchestration on the CPU with a small shape, to check the script itself).

    python scripts/bench_gpu_grid.py                      # bert-base shape, N = 1, 2, 4, 8
    python scripts/bench_gpu_grid.py --shape gpt2 --json  # one JSON document on stdout
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

#: Training examples per GLUE task (the public GLUE train splits).
GLUE_TRAIN_SIZES: dict[str, int] = {
    "cola": 8551, "sst2": 67349, "mrpc": 3668, "stsb": 5749, "qqp": 363846,
    "mnli": 392702, "qnli": 104743, "rte": 2490, "wnli": 635,
}
#: The paper's seven models and the measured shape each is costed at.
PAPER_MODELS: dict[str, str] = {
    "bert-base-uncased": "bert-base", "roberta-base": "bert-base", "albert-base-v2": "bert-base",
    "deberta-base": "bert-base", "distilbert-base-uncased": "bert-base", "distilroberta-base": "bert-base",
    "gpt2": "gpt2",
}
PAPER_EPOCHS = 5
PAPER_SEEDS = 5
TARGETS = {"speedup_over_plain": 5.0, "grid_gpu_hours": 24.0, "energy_sum_rel_error": 0.05}


# ---------------------------------------------------------------------- pure arithmetic
def project_grid(samples_per_s: Mapping[str, float], *, models: Mapping[str, str] = PAPER_MODELS,
                 train_sizes: Mapping[str, int] = GLUE_TRAIN_SIZES, epochs: int = PAPER_EPOCHS,
                 seeds: int = PAPER_SEEDS) -> dict[str, Any]:
    """GPU-hours of the grid: every model × task × seed trains ``epochs`` passes over the task's train set.

    ``samples_per_s`` maps a shape to the aggregate training throughput measured on one
    GPU (several runs packed on it count together: GPU-hours = samples / aggregate rate).

    >>> p = project_grid({"s": 2.0}, models={"m": "s"}, train_sizes={"a": 3600, "b": 7200}, epochs=1, seeds=2)
    >>> p["per_model_gpu_hours"], p["total_gpu_hours"], p["samples_per_model_seed"]
    ({'m': 3.0}, 3.0, 10800)
    """
    per_seed = sum(train_sizes.values()) * epochs
    per_model = {}
    for model, shape in models.items():
        rate = samples_per_s.get(shape)
        if rate is None or rate <= 0:
            raise ValueError(f"no positive throughput measured for shape {shape!r} (model {model})")
        per_model[model] = per_seed * seeds / rate / 3600.0
    return {
        "samples_per_model_seed": per_seed,
        "per_model_gpu_hours": per_model,
        "total_gpu_hours": sum(per_model.values()),
        "epochs": epochs,
        "seeds": seeds,
        "tasks": sorted(train_sizes),
    }


def energy_check(attributed_kwh: list[float], measured_kwh: float) -> dict[str, Any]:
    """Sum of the runs' attributed GPU energies against the GPU's measured energy.

    >>> energy_check([0.001, 0.002, 0.003], 0.006)["rel_error"]
    0.0
    >>> energy_check([1.0, 1.0], 2.5)["within_target"]
    False
    """
    total = float(sum(attributed_kwh))
    rel = abs(total - measured_kwh) / measured_kwh if measured_kwh > 0 else None
    return {"sum_attributed_kwh": total, "measured_kwh": measured_kwh, "rel_error": rel,
            "within_target": rel is not None and rel <= TARGETS["energy_sum_rel_error"]}


def aggregate(workers: list[Mapping[str, Any]], go: float) -> dict[str, Any]:
    """Aggregate throughput of workers that started their timed steps together at ``go``.

    >>> aggregate([{"timed_samples": 100, "t_end": 12.0}, {"timed_samples": 100, "t_end": 10.0}], 2.0)
    {'timed_samples': 200, 'seconds': 10.0, 'samples_s': 20.0}
    """
    samples = sum(int(w["timed_samples"]) for w in workers)
    seconds = max(float(w["t_end"]) for w in workers) - go
    return {"timed_samples": samples, "seconds": seconds, "samples_s": samples / seconds if seconds > 0 else None}


# ---------------------------------------------------------------------- one worker process
def _model(shape: str, vocab: int, pad_id: int) -> Any:
    if shape == "gpt2":  # gpt2's shape (124 M parameters), randomly initialised
        from transformers import GPT2Config, GPT2ForSequenceClassification

        return GPT2ForSequenceClassification(GPT2Config(num_labels=2, pad_token_id=pad_id))
    from transformers import BertConfig, BertForSequenceClassification

    if shape == "bert-base":  # bert-base-uncased's shape (110 M parameters), randomly initialised
        return BertForSequenceClassification(BertConfig(vocab_size=30522, num_labels=2, pad_token_id=pad_id))
    return BertForSequenceClassification(BertConfig(  # "small": for --cpu
        vocab_size=max(vocab, 64), hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=128, num_labels=2, pad_token_id=pad_id))


def worker(args: argparse.Namespace) -> int:
    """Train ``args.steps`` steps (after ``args.warmup``) and write what was measured to ``args.out``."""
    import torch
    import transformers
    from transformers import (
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainerCallback,
        TrainingArguments,
        default_data_collator,
    )

    from harness.energy.tracker import EfficiencyTracker
    from harness.finetune.callbacks import EfficiencyCallback
    from harness.finetune.tasks import Split
    from harness.finetune.train import _tokenize, runtime_settings

    transformers.logging.set_verbosity_error()
    pairs = json.loads(Path(args.pairs).read_text())
    tokenizer = AutoTokenizer.from_pretrained(args.tokenizer)
    plain = args.variant == "plain"
    ds = _tokenize(Split(pairs["a"], pairs["b"], pairs["y"]), tokenizer, args.max_length, pad_to_max=plain)
    transformers.set_seed(args.index)
    model = _model(args.shape, len(tokenizer), tokenizer.pad_token_id)
    cuda = not args.cpu
    ours = runtime_settings("auto")
    barrier = Path(args.barrier)
    marks: dict[str, float] = {}
    total = args.warmup + args.steps

    class Barrier(TrainerCallback):
        def on_step_end(self, a: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.global_step == args.warmup:
                if cuda:
                    torch.cuda.synchronize()
                (barrier / f"ready-{args.index}").write_text("")
                while not (barrier / "go").exists():
                    time.sleep(0.01)
                marks["t0"] = time.time()

        def on_train_end(self, a: Any, state: Any, control: Any, **kw: Any) -> None:
            if cuda:
                torch.cuda.synchronize()
            marks["t1"] = time.time()

    tracker = EfficiencyTracker(cuda_devices=[0] if cuda else [], codecarbon=False, ledger_dir=args.ledger,
                                run_id=f"{args.variant}-n{args.n}-w{args.index}", tick_secs=2.0)
    with tempfile.TemporaryDirectory() as out:
        kwargs: dict[str, Any] = {
            "output_dir": out, "max_steps": total, "per_device_train_batch_size": args.batch_size,
            "learning_rate": 2e-5, "save_strategy": "no", "eval_strategy": "no", "logging_strategy": "no",
            "report_to": "none", "disable_tqdm": True, "seed": args.index, "data_seed": args.index,
            "use_cpu": not cuda,
        }
        if not plain:  # our defaults on this machine
            kwargs.update(optim=ours["optim"], bf16=ours["precision"] == "bf16", fp16=ours["precision"] == "fp16",
                          dataloader_pin_memory=cuda)
            if ours["tf32"]:
                kwargs["tf32"] = True
        trainer = Trainer(model=model, args=TrainingArguments(**kwargs), train_dataset=ds,
                          data_collator=default_data_collator if plain else DataCollatorWithPadding(tokenizer),
                          callbacks=[Barrier(), EfficiencyCallback(tracker)])
        result = trainer.train()
    eff = tracker.result or {}
    Path(args.out).write_text(json.dumps({
        "index": args.index, "variant": args.variant, "t_start": marks["t0"], "t_end": marks["t1"],
        "timed_samples": args.steps * args.batch_size, "loss": float(result.training_loss),
        "gpu_kwh": (eff.get("breakdown") or {}).get("gpu_kwh"), "packing": eff.get("packing"),
        "attribution": eff.get("attribution"), "precision": "fp32" if plain else ours["precision"],
    }))
    return 0


# ---------------------------------------------------------------------- the parent
class GpuSampler:
    """Polls NVML's device utilisation and reads the energy counter (CUDA device 0)."""

    def __init__(self, period: float = 0.2):
        import pynvml

        from harness.energy.nvml import NvmlEnergyMeter

        self.meter = NvmlEnergyMeter([0])
        self.ok = self.meter.start()
        self._pynvml = pynvml
        self.period = period
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def counter_mj(self) -> int | None:
        return self.meter.read_device_mj(0) if self.ok else None

    def start(self) -> None:
        self.samples = []
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        handle = self.meter._handles[0] if self.ok else None
        while not self._stop.wait(self.period):
            if handle is not None:
                try:
                    self.samples.append(float(self._pynvml.nvmlDeviceGetUtilizationRates(handle).gpu))
                except Exception:
                    return

    def stop(self) -> float | None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return sum(self.samples) / len(self.samples) if self.samples else None


def run_config(variant: str, n: int, *, opts: argparse.Namespace, work: Path, sampler: GpuSampler | None) -> dict[str, Any]:
    """Run ``n`` workers of ``variant`` side by side; collect throughput, utilisation and energy."""
    from harness.energy.ledger import GpuLedger, measured_total
    from harness.energy.nvml import MJ_PER_KWH

    tag = f"{variant}-n{n}"
    barrier, ledger_dir = work / tag / "barrier", work / tag / "energy"
    barrier.mkdir(parents=True)
    procs, outs = [], []
    for i in range(n):
        out = work / tag / f"worker-{i}.json"
        outs.append(out)
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", "--variant", variant, "--n", str(n),
               "--index", str(i), "--out", str(out), "--barrier", str(barrier), "--ledger", str(ledger_dir),
               "--pairs", str(work / "pairs.json"), "--tokenizer", str(work / "tokenizer"),
               "--shape", opts.shape, "--steps", str(opts.steps), "--warmup", str(opts.warmup),
               "--batch-size", str(opts.batch_size), "--max-length", str(opts.max_length)]
        if opts.cpu:
            cmd.append("--cpu")
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    while len(list(barrier.glob("ready-*"))) < n:  # every worker loaded and warmed up
        failed = [p for p in procs if p.poll() not in (None, 0)]
        if failed:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            raise SystemExit(f"a worker of {tag} failed: {failed[0].stderr.read()[-2000:]}")
        time.sleep(0.02)
    mj0 = sampler.counter_mj() if sampler else None
    if sampler:
        sampler.start()
    go = time.time()
    (barrier / "go").write_text("")
    errors = []
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            errors.append(err[-2000:])
    util = sampler.stop() if sampler else None
    mj1 = sampler.counter_mj() if sampler else None
    if errors:
        raise SystemExit(f"a worker of {tag} failed: {errors[0]}")
    workers = [json.loads(o.read_text()) for o in outs]
    agg = aggregate(workers, go)
    window_kwh = (mj1 - mj0) / MJ_PER_KWH if mj0 is not None and mj1 is not None else None
    row: dict[str, Any] = {
        "variant": variant, "n": n, "precision": workers[0]["precision"], **agg,
        "gpu_util_pct": util,
        "wh_per_1000_samples": window_kwh * 1000 / agg["timed_samples"] * 1000 if window_kwh is not None else None,
        "losses": [w["loss"] for w in workers],
        "packing": [w["packing"] for w in workers],
    }
    attributed = [w["gpu_kwh"] for w in workers]
    ledgers = list(ledger_dir.glob("*.jsonl"))
    if ledgers and all(a is not None for a in attributed):
        measured = sum(measured_total(GpuLedger(p).events())["gpu_mj"] for p in ledgers) / MJ_PER_KWH
        row["energy_check"] = energy_check(attributed, measured)
    else:
        row["energy_check"] = None
    return row


def _prepare(work: Path, opts: argparse.Namespace) -> str:
    """The examples (a GLUE task's train rows, else synthetic pairs) and a tokenizer trained on them, on disk."""
    from harness.finetune.tasks import load_task
    from harness.models import load_tokenizer

    n = (opts.warmup + opts.steps) * opts.batch_size
    source = f"{opts.task} train"
    try:
        data = load_task(opts.task, Path(opts.data_root) if opts.data_root else None, max_train_samples=n)
        a, b, y = data.train.text_a, data.train.text_b, data.train.label
        if len(a) < n:  # cycle a small train set so that every worker has enough steps
            reps = -(-n // len(a))
            a, y = (a * reps)[:n], (y * reps)[:n]
            b = (b * reps)[:n] if b is not None else None
    except Exception as exc:
        import random

        rng = random.Random(0)
        words = "the a model learns energy cost of training language data over seeds and tasks GPU".split()
        a = [" ".join(rng.choices(words, k=rng.randint(5, 60))) for _ in range(n)]
        b = None
        y = [rng.randint(0, 1) for _ in range(n)]
        source = f"synthetic sentences ({opts.task} not loadable: {type(exc).__name__})"
    (work / "pairs.json").write_text(json.dumps({"a": a, "b": b, "y": y}))
    family = "gpt2" if opts.shape == "gpt2" else "bert"
    load_tokenizer(f"tiny:{family}", texts=a + (b or [])).save_pretrained(str(work / "tokenizer"))
    return source


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=("bert-base", "gpt2", "small"), default=None,
                   help="model shape (default bert-base; small with --cpu)")
    p.add_argument("--task", default="sst2", help="GLUE task whose train texts are used (default %(default)s)")
    p.add_argument("--packing", default="1,2,4,8", help="runs per GPU to measure (default %(default)s)")
    p.add_argument("--steps", type=int, default=300, help="timed optimizer steps per run (default %(default)s)")
    p.add_argument("--warmup", type=int, default=30, help="untimed steps first (default %(default)s)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--data-root", default=os.environ.get("VNR_DATA_ROOT"))
    p.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    p.add_argument("--cpu", action="store_true", help="run on the CPU (checks the script, measures nothing useful)")
    # worker-only options
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    for name in ("--variant", "--out", "--barrier", "--ledger", "--pairs", "--tokenizer"):
        p.add_argument(name, help=argparse.SUPPRESS)
    p.add_argument("--n", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--index", type=int, default=0, help=argparse.SUPPRESS)
    opts = p.parse_args(argv)
    opts.shape = opts.shape or ("small" if opts.cpu else "bert-base")
    if opts.worker:
        return worker(opts)

    import torch

    if not opts.cpu and not torch.cuda.is_available():
        reason = "no CUDA GPU here: bench_gpu_grid skipped"
        print(json.dumps({"skipped": reason}) if opts.json else reason)
        return 0
    levels = sorted({int(x) for x in str(opts.packing).split(",") if x.strip()})
    if not levels or min(levels) < 1:
        p.error("--packing: a comma-separated list of positive integers, e.g. 1,2,4,8")
    if opts.warmup < 1 or opts.steps < 1:
        p.error("--warmup and --steps must be at least 1")
    sampler = None if opts.cpu else GpuSampler()
    device = "cpu" if opts.cpu else torch.cuda.get_device_name(0)
    with tempfile.TemporaryDirectory(prefix="vnr-bench-gpu-") as tmp:
        work = Path(tmp)
        source = _prepare(work, opts)
        rows = [run_config("plain", 1, opts=opts, work=work, sampler=sampler)]
        rows += [run_config("ours", n, opts=opts, work=work, sampler=sampler) for n in levels]
    plain = rows[0]["samples_s"]
    for r in rows:
        r["speedup_over_plain"] = r["samples_s"] / plain if plain else None
    best = max(rows[1:], key=lambda r: r["samples_s"] or 0.0)
    projection = project_grid({opts.shape: best["samples_s"]},
                              models={m: opts.shape for m in PAPER_MODELS}) if best["samples_s"] else None
    checks = [r["energy_check"] for r in rows if r["energy_check"]]
    report = {
        "device": device, "shape": opts.shape, "data": source, "batch_size": opts.batch_size,
        "max_length": opts.max_length, "timed_steps": opts.steps, "warmup_steps": opts.warmup,
        "rows": rows,
        "best": {"variant": best["variant"], "n": best["n"], "samples_s": best["samples_s"]},
        "projection": projection,
        "targets": TARGETS,
        "meets": {
            "speedup_over_plain": (best["speedup_over_plain"] or 0) >= TARGETS["speedup_over_plain"],
            "grid_gpu_hours": projection is not None and projection["total_gpu_hours"] <= TARGETS["grid_gpu_hours"],
            "energy_sum": bool(checks) and all(c["within_target"] for c in checks),
        },
    }
    if opts.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"== {opts.shape}-shaped model on {device}; data: {source}; batch {opts.batch_size}, "
          f"max_length {opts.max_length}, {opts.steps} timed steps per run after {opts.warmup} warm-up steps")
    print(f"{'variant':<8} {'N':>2} {'prec':>5} {'samples/s':>10} {'x plain':>8} {'GPU util %':>10} "
          f"{'Wh/1000':>9} {'sum/measured':>13}")
    for r in rows:
        util = f"{r['gpu_util_pct']:.0f}" if r["gpu_util_pct"] is not None else "-"
        wh = f"{r['wh_per_1000_samples']:.3f}" if r["wh_per_1000_samples"] is not None else "-"
        ec = r["energy_check"]
        check = f"{ec['sum_attributed_kwh'] / ec['measured_kwh']:.4f}" if ec and ec["measured_kwh"] else "-"
        print(f"{r['variant']:<8} {r['n']:>2} {r['precision']:>5} {r['samples_s']:>10.1f} "
              f"{r['speedup_over_plain']:>8.2f} {util:>10} {wh:>9} {check:>13}")
    if projection:
        print(f"paper grid ({len(PAPER_MODELS)} models x {len(GLUE_TRAIN_SIZES)} tasks x {PAPER_SEEDS} seeds x "
              f"{PAPER_EPOCHS} epochs, every model at this shape) at {best['samples_s']:.0f} samples/s "
              f"(ours, N={best['n']}): {projection['total_gpu_hours']:.1f} GPU-hours of training")
    print("targets met: " + ", ".join(f"{k}={v}" for k, v in report["meets"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
