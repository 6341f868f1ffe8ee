"""Benchmark: the calibration on the device this runs on, and what the paper grid then costs.

It runs :func:`harness.grid.calibrate.ensure_calibration` (timed bursts of N = 1, 2, 4, 8, 16 runs side
by side at each candidate precision, the real training path; see that module) for one fine-tuning spec
of the paper's recipe (batch 16, max_length 128) on a model of the chosen shape (``--shape``:
``bert-base`` or ``gpt2``, randomly initialised and saved to a local directory, so nothing is
downloaded; its WordPiece/BPE vocabulary is trained on the GLUE texts in the data root), prints the
calibration table, and projects the paper grid (7 models × 9 GLUE tasks × 5 seeds × 5 epochs: 949,733
training examples × 25 × 7 = 166 M training samples; evaluation not counted; every model costed at
the measured shape, as DistilBERT/DistilRoBERTa are cheaper and DeBERTa dearer) in device-hours:

* at the calibrated setting (the calibration's winner: N runs side by side at its precision);
* at one run per device (the best N = 1 row: the straightforward way);
* fused: K runs of one cell as one stacked model (``--fuse``, default 1,2,5,10: the calibration's fused
  bursts, K growing while it gains), and the chosen K with its whole step captured (CUDA graph replay; the
  capture time, measured, counted against a group of the spec's runs); the best of every setting is the
  projection the goal is held to (``TARGETS``: 5 device-hours, issue 35);
* the arithmetic floor: 6 × parameters × real tokens / peak FLOP/s (real tokens: the GLUE train sets
  in the data root tokenized by the shape's tokenizer, truncated at max_length; tasks absent from the
  data root at the mean of the present ones; peak from :data:`PEAK_TFLOPS` by GPU name, dense bf16/fp16
  tensor throughput, or ``--peak-tflops``).

Without a CUDA GPU it prints one line and exits 0 (``--cpu`` runs the same calibration on the CPU with
the tiny BERT, to check the script itself; the CPU has no FLOP/s peak unless ``--peak-tflops``).

    python scripts/bench_gpu_grid.py                      # bert-base shape
    python scripts/bench_gpu_grid.py --shape gpt2 --json  # one JSON document on stdout
    python scripts/bench_gpu_grid.py --padding bucket,flatten,pad     # each batch layout, side by side

``--padding`` takes one layout or several (comma-separated): each is calibrated in turn (its own entry:
the layout is part of a calibration's shape) and projected, and a last line compares their calibrated
samples/s; ``flatten`` works for both shapes (BERT-family encoders and GPT-2 flatten: harness.finetune.flat).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from harness.grid.calibrate import GLUE_TRAIN_SIZES  # noqa: E402  (the public GLUE train splits)

#: The paper's seven models and the measured shape each is costed at.
PAPER_MODELS: dict[str, str] = {
    "bert-base-uncased": "bert-base", "roberta-base": "bert-base", "albert-base-v2": "bert-base",
    "deberta-base": "bert-base", "distilbert-base-uncased": "bert-base", "distilroberta-base": "bert-base",
    "gpt2": "gpt2",
}
PAPER_EPOCHS = 5
PAPER_SEEDS = 5
TARGETS = {"grid_gpu_hours": 5.0}  # issue 35: the paper grid at <= 5 H100-hours (the floor is about 0.5)
#: GLUE texts per task the shape's tokenizer is trained on, and the examples per task its tokens per sample are
#: counted on: a few thousand give the same mean length to a few per cent; 50,000 took minutes before any burst
#: (issue 37). The model's vocabulary size is the real model's either way (bert-base 30522, gpt2 50257).
TOKENIZER_TEXTS_PER_TASK = 2000
#: Dense bf16/fp16 tensor-core peak (TFLOP/s, no sparsity) by a fragment of the GPU's name; first match wins.
PEAK_TFLOPS: tuple[tuple[str, float], ...] = (
    ("h100 pcie", 756.0), ("h100 nvl", 835.0), ("h100", 989.0), ("h200", 989.0), ("gh200", 989.0),
    ("b200", 2250.0), ("a100", 312.0), ("l40s", 362.0), ("l40", 181.0), ("l4", 121.0), ("a10", 125.0),
    ("v100", 125.0), ("t4", 65.0),
)


# ---------------------------------------------------------------------- pure arithmetic
def project_grid(samples_per_s: Mapping[str, float], *, models: Mapping[str, str] = PAPER_MODELS,
                 train_sizes: Mapping[str, int] = GLUE_TRAIN_SIZES, epochs: int = PAPER_EPOCHS,
                 seeds: int = PAPER_SEEDS) -> dict[str, Any]:
    """Device-hours of the grid: every model × task × seed trains ``epochs`` passes over the task's train set.

    ``samples_per_s`` maps a shape to the aggregate training throughput measured on one
    device (several runs packed on it count together: hours = samples / aggregate rate).

    >>> p = project_grid({"s": 2.0}, models={"m": "s"}, train_sizes={"a": 3600, "b": 7200}, epochs=1, seeds=2)
    >>> p["per_model_gpu_hours"], p["total_gpu_hours"], p["samples_per_model_seed"], p["total_samples"]
    ({'m': 3.0}, 3.0, 10800, 21600)
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
        "total_samples": per_seed * seeds * len(models),
        "per_model_gpu_hours": per_model,
        "total_gpu_hours": sum(per_model.values()),
        "epochs": epochs,
        "seeds": seeds,
        "tasks": sorted(train_sizes),
    }


def peak_tflops(device_name: str) -> float | None:
    """Dense bf16 peak of a GPU by name (None where the table has none).

    >>> peak_tflops("NVIDIA H100 80GB HBM3"), peak_tflops("NVIDIA H100 PCIe"), peak_tflops("AMD EPYC")
    (989.0, 756.0, None)
    """
    name = device_name.lower()
    return next((value for key, value in PEAK_TFLOPS if key in name), None)


def floor_hours(parameters: int, real_tokens: float, tflops: float) -> float:
    """The arithmetic floor: 6 × parameters × tokens FLOPs (forward and backward) at the peak rate.

    >>> floor_hours(100_000_000, 6e9, 1000.0)
    1.0
    """
    return 6.0 * parameters * real_tokens / (tflops * 1e12) / 3600.0


def grid_real_tokens(tokens_per_sample: Mapping[str, float], *, train_sizes: Mapping[str, int] = GLUE_TRAIN_SIZES,
                     epochs: int = PAPER_EPOCHS, seeds: int = PAPER_SEEDS, models: int = len(PAPER_MODELS)) -> float:
    """Real (non-padding) tokens the grid trains on; a task without a measured mean gets the size-weighted
    mean of the measured ones.

    >>> grid_real_tokens({"a": 10.0}, train_sizes={"a": 100, "b": 300}, epochs=1, seeds=1, models=1)
    4000.0
    """
    known = {t: v for t, v in tokens_per_sample.items() if t in train_sizes}
    if not known:
        raise ValueError("no task's tokens per sample measured")
    mean = sum(train_sizes[t] * v for t, v in known.items()) / sum(train_sizes[t] for t in known)
    per_pass = sum(size * known.get(task, mean) for task, size in train_sizes.items())
    return per_pass * epochs * seeds * models


# ---------------------------------------------------------------------- what is measured
def tokens_per_sample(tokenizer: Any, data_root: Path | None, max_length: int,
                      limit: int = TOKENIZER_TEXTS_PER_TASK) -> dict[str, float]:
    """Mean real tokens per training example of each GLUE task in the data root (first ``limit`` examples)."""
    from harness.finetune.tasks import get_task, load_task, local_folder

    out = {}
    for task in GLUE_TRAIN_SIZES:
        if data_root is None or local_folder(get_task(task), data_root) is None:
            continue
        split = load_task(task, data_root, max_train_samples=limit).train
        args = (split.text_a, split.text_b) if split.text_b is not None else (split.text_a,)
        ids = tokenizer(*args, truncation=True, max_length=max_length)["input_ids"]
        out[task] = sum(len(x) for x in ids) / len(ids)
    return out


def build_shape(shape: str, directory: Path, data_root: Path | None) -> tuple[str, int]:
    """A randomly initialised model of ``shape`` with a tokenizer trained on the GLUE texts, saved to
    ``directory`` (a local checkpoint the training path loads offline); returns (model name, parameters)."""
    if shape == "small":
        from harness.models import TINY_PREFIX

        return TINY_PREFIX + "bert", 0
    import transformers as tf

    from harness.finetune.tasks import get_task, load_task, local_folder
    from harness.models import train_tiny_tokenizer

    texts: list[str] = []
    for task in GLUE_TRAIN_SIZES:
        if data_root is not None and local_folder(get_task(task), data_root) is not None:
            split = load_task(task, data_root, max_train_samples=TOKENIZER_TEXTS_PER_TASK).train
            texts += split.text_a + (split.text_b or [])
    if not texts:
        raise SystemExit("no GLUE task in the data root to train the tokenizer on: give --data-root")
    family = "gpt2" if shape == "gpt2" else "bert"
    tokenizer = train_tiny_tokenizer(family, texts, vocab_size=50257 if family == "gpt2" else 30522)
    if family == "gpt2":
        config = tf.GPT2Config(vocab_size=50257, num_labels=2, pad_token_id=tokenizer.eos_token_id,
                               bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
        model = tf.GPT2ForSequenceClassification(config)
    else:
        config = tf.BertConfig(vocab_size=30522, num_labels=2, pad_token_id=tokenizer.pad_token_id)
        model = tf.BertForSequenceClassification(config)
    model.save_pretrained(str(directory))
    tokenizer.save_pretrained(str(directory))
    return str(directory), int(sum(p.numel() for p in model.parameters()))


def summarise(cal: Any, *, parameters: int, tokens: Mapping[str, float], shape: str, peak: float | None,
              device_name: str) -> dict[str, Any]:
    """The report: the table, the winner, the one-run figure, the projections and the floor. Where the
    calibration measured nothing at N = 1 (or nothing at all), those figures are None (printed as a row saying
    so), not an error.

    >>> class Cal:  # a calibration whose only N = 1 burst was cut at the budget
    ...     path, reused = "out/calibration/x.json", False
    ...     doc = {"device": {"kind": "x"}, "spec": {}, "rows": [{"n": 1, "precision": "fp32", "status": "cut"}],
    ...            "chosen": {"runs_per_gpu": 1, "precision": "fp32", "samples_s": None, "measured": False}}
    >>> r = summarise(Cal(), parameters=0, tokens={}, shape="small", peak=None, device_name="cpu")
    >>> r["one_run_per_gpu"], r["speedup_over_one_run"], r["projection"]["calibrated_gpu_hours"]
    (None, None, None)
    """
    from harness.grid.calibrate import measured_rates

    rows = cal.doc["rows"]
    # the best precision at N = 1, by the same median over windows the calibration chose by
    at_one = [(key, r) for key, r in measured_rates(rows).items() if key[0] == 1]
    single = None
    if at_one:
        (_, precision), rate = max(at_one, key=lambda kv: kv[1])
        single = {"n": 1, "precision": precision, "samples_s": rate}
    chosen = cal.doc["chosen"]
    models = {m: shape for m in PAPER_MODELS}
    calibrated = project_grid({shape: chosen["samples_s"]}, models=models) if chosen.get("samples_s") else None
    one_run = project_grid({shape: single["samples_s"]}, models=models) if single else None
    real = grid_real_tokens(tokens) if tokens else None
    floor = floor_hours(parameters, real, peak) if real and peak and parameters else None
    fused = fused_rates(cal.doc)
    settings = {**({f"N={chosen['runs_per_gpu']} {chosen['precision']}": chosen["samples_s"]}
                   if chosen.get("samples_s") else {}), **fused}
    hours_of = {name: project_grid({shape: rate}, models=models)["total_gpu_hours"] for name, rate in settings.items()}
    best = min(hours_of, key=hours_of.__getitem__) if hours_of else None
    hours = hours_of[best] if best else None
    return {
        "device": device_name, "device_kind": cal.doc["device"]["kind"], "shape": shape, "parameters": parameters,
        "calibration_file": str(cal.path) if chosen.get("measured", True) else None,
        "calibration_reused": cal.reused, "spec": cal.doc["spec"], "rows": rows, "chosen": chosen,
        "fuse": cal.doc.get("fuse"),
        "one_run_per_gpu": single,
        "speedup_over_one_run": chosen["samples_s"] / single["samples_s"] if single and calibrated else None,
        "projection": {
            "total_samples": project_grid({"x": 1.0}, models={m: "x" for m in PAPER_MODELS})["total_samples"],
            "calibrated_gpu_hours": calibrated["total_gpu_hours"] if calibrated else None,
            "fused_gpu_hours": {name: hours_of[name] for name in fused},
            "best": {"setting": best, "samples_s": settings[best], "gpu_hours": hours} if best else None,
            "one_run_per_gpu_hours": one_run["total_gpu_hours"] if one_run else None,
            "floor_gpu_hours": floor,
            "real_tokens": real, "tokens_per_sample": dict(tokens), "peak_tflops": peak,
        },
        "targets": TARGETS,
        "meets": {"grid_gpu_hours": hours is not None and hours <= TARGETS["grid_gpu_hours"]},
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=("bert-base", "gpt2", "small"), default=None,
                   help="model shape (default bert-base; small, the tiny BERT, with --cpu)")
    p.add_argument("--task", default="sst2", help="GLUE task the bursts train on (default %(default)s)")
    p.add_argument("--candidates", default="1,2,4,8,16", help="runs side by side to try (default %(default)s)")
    p.add_argument("--budget", type=float, default=None, help="hard cap on the bursts' seconds (default: the "
                   "calibration's, 600 on a GPU)")
    p.add_argument("--steps", type=int, default=None,
                   help="timed optimizer steps per window, 3 windows a burst (default: calibration's)")
    p.add_argument("--warmup", type=int, default=None, help="untimed steps first (default: calibration's)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--padding", default="auto",
                   help="batch layout(s) of the bursts, comma-separated, each calibrated and projected in turn: "
                   "auto, bucket, pad, flatten (default %(default)s)")
    p.add_argument("--fuse", default="1,2,5,10", help="fused group sizes K the calibration measures, comma-separated "
                   "(default %(default)s; K=1 is the fused code path alone); '' for none")
    p.add_argument("--no-capture", action="store_true", help="do not measure the captured step of the chosen K")
    p.add_argument("--peak-tflops", type=float, default=None, help="the device's peak TFLOP/s for the floor "
                   "(default: by GPU name from PEAK_TFLOPS)")
    p.add_argument("--output", default=None, help="keep <output>/calibration/<kind>.json here (default: a temp dir)")
    p.add_argument("--data-root", default=os.environ.get("VNR_DATA_ROOT"))
    p.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    p.add_argument("--cpu", action="store_true", help="run on the CPU (checks the script, measures nothing useful)")
    opts = p.parse_args(argv)
    opts.shape = opts.shape or ("small" if opts.cpu else "bert-base")
    from harness.finetune.batching import PADDING_OPTIONS

    layouts = [x.strip() for x in str(opts.padding).split(",") if x.strip()]
    if not layouts or any(x not in PADDING_OPTIONS for x in layouts) or len(set(layouts)) < len(layouts):
        p.error(f"--padding {opts.padding}: one or more of {', '.join(PADDING_OPTIONS)}, comma-separated, each once")

    import torch

    if opts.cpu:
        os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the workers see no GPU either
    elif not torch.cuda.is_available():
        reason = "no CUDA GPU here: bench_gpu_grid skipped"
        print(json.dumps({"skipped": reason}) if opts.json else reason)
        return 0
    try:
        candidates = tuple(sorted({int(x) for x in str(opts.candidates).split(",") if x.strip()}))
    except ValueError:
        candidates = ()
    if not candidates or min(candidates) < 1:
        p.error("--candidates: a comma-separated list of positive integers, e.g. 1,2,4,8,16")
    try:
        fuse = tuple(sorted({int(x) for x in str(opts.fuse).split(",") if x.strip()}))
    except ValueError:
        fuse = (0,)
    if fuse and min(fuse) < 1:
        p.error("--fuse: a comma-separated list of group sizes K >= 1, e.g. 1,2,5,10 (or '' for none)")

    from harness.finetune.tasks import get_task
    from harness.grid.calibrate import Limits, detect_device, ensure_calibration
    from harness.models import load_tokenizer
    from harness.specs import FinetuneSpec
    from ranking.floor.paths import resolve_data_root

    data_root = resolve_data_root(opts.data_root)
    device = detect_device()
    reports = []
    with tempfile.TemporaryDirectory(prefix="vnr-bench-gpu-") as tmp:
        work = Path(tmp)
        model, parameters = build_shape(opts.shape, work / "model", data_root)
        if opts.shape == "small":  # the tiny model's vocabulary is trained on the task's first texts, as in a run
            from harness.finetune.tasks import load_task
            from harness.finetune.train import TINY_TOKENIZER_TEXTS

            texts = load_task(get_task(opts.task), data_root).train.texts()[:TINY_TOKENIZER_TEXTS]
            tokenizer = load_tokenizer(model, texts=texts)
        else:
            tokenizer = load_tokenizer(model)
        tokens = tokens_per_sample(tokenizer, data_root, opts.max_length)
        paper = project_grid({"x": 1.0}, models={m: "x" for m in PAPER_MODELS})["total_samples"]
        for layout in layouts:
            spec = FinetuneSpec(model, get_task(opts.task).name, 0, batch_size=opts.batch_size,
                                max_length=opts.max_length, padding=layout)
            cal = ensure_calibration(spec, Path(opts.output) if opts.output else work / "out", data_root=data_root,
                                     grid_samples_total=paper,
                                     limits=Limits(candidates=candidates, budget_cap_s=opts.budget, steps=opts.steps,
                                                   warmup=opts.warmup, fuse_candidates=fuse,
                                                   capture=not opts.no_capture), device=device)
            measured = next((r for r in cal.doc["rows"] if r["status"] == "measured"), {})
            params = parameters or int(measured.get("model_parameters") or 0)
            peak = (opts.peak_tflops if opts.peak_tflops is not None
                    else peak_tflops(device.name) if device.type == "cuda" else None)
            report = summarise(cal, parameters=params, tokens=tokens, shape=opts.shape, peak=peak,
                               device_name=device.name)
            report["padding"] = layout
            reports.append((cal, report))
    if opts.json:
        docs = [r for _, r in reports]
        print(json.dumps(docs[0] if len(docs) == 1 else {"layouts": docs}, indent=2))
        return 0
    for cal, report in reports:
        _print_report(cal, report, opts.shape, device.name, params)
    if len(reports) > 1:
        print("layouts, calibrated samples/s: " + ", ".join(
            f"{r['padding']} {format(r['chosen']['samples_s'] or 0, '.0f') if r['chosen']['samples_s'] else 'not measured'}"
            f" (N={r['chosen']['runs_per_gpu']}, {r['chosen']['precision']})"
            for _, r in reports))
    return 0


def fused_rates(doc: Mapping[str, Any]) -> dict[str, float]:
    """Setting name → samples/s of the calibration's measured fused groups and its captured burst.

    >>> fused_rates({"fuse": {"rows": [{"fuse": 2, "status": "measured", "samples_s": 300.0},
    ...                                {"fuse": 5, "status": "skipped"}],
    ...                       "capture": {"chosen": "on", "captured_samples_s": 900.0, "rows": [{"fuse": 2}]}}})
    {'fused K=2': 300.0, 'fused K=2, captured': 900.0}
    """
    fuse = doc.get("fuse") or {}
    out = {f"fused K={r['fuse']}": float(r["samples_s"]) for r in fuse.get("rows", [])
           if r.get("status") == "measured" and r.get("samples_s")}
    capture = fuse.get("capture") or {}
    if capture.get("captured_samples_s"):
        out[f"fused K={capture['rows'][0]['fuse']}, captured"] = float(capture["captured_samples_s"])
    return out


def projection_rows(report: Mapping[str, Any]) -> list[str]:
    """The calibrated and one-run rows of the projection; a setting the calibration did not measure is a row
    saying so.

    >>> projection_rows({"chosen": {"runs_per_gpu": 1, "precision": "fp32", "samples_s": None},
    ...                  "one_run_per_gpu": None, "speedup_over_one_run": None,
    ...                  "projection": {"calibrated_gpu_hours": None, "one_run_per_gpu_hours": None}})
    ['  calibrated: not measured (nothing measured within the budget)', '  one run per device: not measured (no burst at N=1 gave a rate)']
    """
    chosen, one, proj = report["chosen"], report["one_run_per_gpu"], report["projection"]
    if chosen.get("samples_s"):
        rows = [f"  calibrated (N={chosen['runs_per_gpu']}, {chosen['precision']}, {chosen['samples_s']:.0f} "
                f"samples/s): {proj['calibrated_gpu_hours']:.1f}"]
    else:
        rows = ["  calibrated: not measured (nothing measured within the budget)"]
    if one is None:
        rows.append("  one run per device: not measured (no burst at N=1 gave a rate)")
    else:
        speedup = (f"  (the calibrated setting: {report['speedup_over_one_run']:.2f}x its throughput)"
                   if report.get("speedup_over_one_run") else "")
        rows.append(f"  one run per device (N=1, {one['precision']}, {one['samples_s']:.0f} samples/s): "
                    f"{proj['one_run_per_gpu_hours']:.1f}{speedup}")
    for name, hours in (proj.get("fused_gpu_hours") or {}).items():
        rows.append(f"  {name} (fp32): {hours:.1f}")
    if proj.get("best"):
        rows.append(f"  best measured: {proj['best']['setting']}, {proj['best']['samples_s']:.0f} samples/s: "
                    f"{proj['best']['gpu_hours']:.1f}")
    return rows


def _print_report(cal: Any, report: dict[str, Any], shape: str, device_name: str, parameters: int) -> None:
    from harness.grid.calibrate import format_table

    print(format_table(cal))
    proj = report["projection"]
    print(f"paper grid ({len(PAPER_MODELS)} models x {len(GLUE_TRAIN_SIZES)} tasks x {PAPER_SEEDS} seeds x "
          f"{PAPER_EPOCHS} epochs = {proj['total_samples'] / 1e6:.0f} M training samples, every model at the "
          f"{shape} shape, padding {report['padding']}), device-hours of training on {device_name}:")
    for line in projection_rows(report):
        print(line)
    if proj["floor_gpu_hours"] is not None:
        print(f"  arithmetic floor (6 x {parameters / 1e6:.3g} M parameters x {proj['real_tokens'] / 1e9:.2f} G real "
              f"tokens at {proj['peak_tflops']:.0f} TFLOP/s): {proj['floor_gpu_hours']:.2f}")
    else:
        print("  arithmetic floor: no peak FLOP/s for this device (give --peak-tflops)")
    print("targets met: " + ", ".join(f"{k}={v}" for k, v in report["meets"].items()))


if __name__ == "__main__":
    sys.exit(main())
