"""Benchmark: our fine-tuning setup against plain ``Trainer`` defaults, interleaved, side by side.

Per GLUE task (``--task``, default SST-2 then RTE), the same model, data (the task's train texts from the
data root, else synthetic sentence pairs), batch size, seed and number of steps for every variant; each variant trains a fresh copy of the same initial weights on
the same examples in the same order (so their training losses agree):

* ``plain``: ``TrainingArguments`` defaults, every example padded to ``max_length`` (the usual
  ``padding="max_length"`` preprocessing);
* ``padded``: ours (:func:`harness.finetune.train.runtime_settings`), each batch padded to its longest example;
* ``ours``: what :func:`harness.finetune.train.run_finetune` uses: the batch layout ``padding: auto`` picks
  (:mod:`harness.finetune.batching`; bucketed to a multiple of 8) and the token accounting callback;
* ``flattened``: ``padding: flatten``, each batch packed into rows as wide as its longest example
  (:mod:`harness.finetune.flat`), for every ``--family`` (bert, roberta, albert, distilbert: encoders;
  gpt2: a decoder), to decide whether ``auto`` should flatten that family on this device;
* on a GPU also ``ours in fp32`` where ours is not fp32;
* ``--compile``: ``ours, compiled`` (and ``flattened, compiled``): the same with the training step compiled as
  ``compile: on`` does it (``TrainingArguments(torch_compile=True)``: :mod:`harness.finetune.compilation`), side by
  side with their eager twins. The compile happens in the untimed warm-up of the variant's first round (``warmup_s``
  per round says what it cost; later rounds train a fresh model of the same architecture, and dynamo reuses the
  code compiled for it) and a batch width not seen before may recompile inside the timed steps: a compiled row is
  what a run of that length gets after its compile, not a best case.

Trustworthy timing: ``--steps`` (default 100; ``--quick`` 12) timed steps per variant after
``--warmup`` untimed ones, one CPU thread (``torch.set_num_threads(1)``), ``--rounds`` (default 3)
interleaved rounds (every variant once per round, the order rotated each round) so that drift and other
processes' load hit every variant alike; printed per variant: min and median samples/s and real tokens/s over
the rounds, the padding share, the training loss; and the load average before and after. The efficiency
tracker is not in the timed runs: its own cost is measured directly (``tracker cost``).

``--padding-report``: the padding share per GLUE task at batch 32 (max_length 128) under random order, random
order bucketed to a multiple of 8, length grouping (transformers' ``LengthGroupedSampler``), flattened (random
order, each batch packed best-fit into rows of its longest example, as ``padding: flatten`` does), and the
whole split packed into 128-token rows (in order, and best-fit decreasing), with a BERT-style WordPiece
tokenizer of 30,522 pieces trained on each task's own texts (no download; close to bert-base-uncased's lengths).

    python scripts/bench_finetune.py                    # CPU small BERT (+ bert-base shape on a GPU when present)
    python scripts/bench_finetune.py --quick --json     # fewer steps, CPU only, one JSON document on stdout
    python scripts/bench_finetune.py --family roberta   # RoBERTa-shaped, on SST-2 then RTE (the default tasks)
    python scripts/bench_finetune.py --padding-report   # padding shares per GLUE task
    python scripts/bench_finetune.py --compile --task sst2   # compiled training steps beside eager
    python scripts/bench_finetune.py --fuse 1,2,5,10 --task rte  # K seeds fused into one stacked model beside ours
    python scripts/bench_finetune.py --fuse 2,10 --capture --task rte  # and their captured whole steps beside them

``--fuse``: ``fused K=k`` rows, k runs (seeds 0 … k-1, the same initial weights) trained as one stacked model
(:mod:`harness.finetune.fused`: ``vmap`` over the stacked weights, eager attention, per-run AdamW), in the same
interleaved rounds; their samples/s counts all k runs' samples, against ``ours`` training one run at a time.
Their loss is run 0's (the Trainer's seed-0 order): the sanity check holds it to 1e-4 relative.

``--capture`` (with ``--fuse``): ``fused K=k, captured`` rows beside each ``fused K=k``: the group's whole step
compiled into one graph per static batch shape (:meth:`harness.finetune.fused.StackedRuns.captured_step`: on a
GPU a CUDA graph replayed; on a CPU captured and run by AOTAutograd's eager kernels, nothing to replay). Each
round builds a new group, so each round's warm-up compiles again (``warmup_s``); a width first seen inside the
timed steps compiles there, so a captured row is what a short run gets, not a best case.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

PADDING_TASKS = ("cola", "sst2", "mrpc", "stsb", "qnli", "rte", "wnli")


@dataclass
class Variant:
    name: str
    padding: str  # max_length | pad | auto (harness.finetune.batching)
    precision: str  # fp32 | bf16 | fp16
    optim: str | None  # None: the TrainingArguments default
    tf32: bool = False
    compile: bool = False  # TrainingArguments(torch_compile=True), as compile: on


def _texts(task: str, data_root: Path | None, n: int) -> tuple[list[str], list[str] | None, list[int], str]:
    from harness.finetune.tasks import get_task, load_task

    if data_root is not None:
        try:
            data = load_task(get_task(task), data_root, max_train_samples=n)
            return data.train.text_a, data.train.text_b, data.train.label, f"{task} train (first {len(data.train)})"
        except Exception as exc:  # not under that root: fall back to synthetic data
            print(f"({task} not loadable from {data_root}: {exc}; using synthetic pairs)")
    import random

    rng = random.Random(0)
    words = "the a model learns energy cost of training language data over seeds and tasks GPU".split()
    a = [" ".join(rng.choices(words, k=rng.randint(5, 60))) for _ in range(n)]
    b = [" ".join(rng.choices(words, k=rng.randint(3, 15))) for _ in range(n)]
    return a, b, [rng.randint(0, 1) for _ in range(n)], f"synthetic pairs ({n})"


#: Each family's dropout settings, all off (a dropout mask is drawn per computed token, so batches of different
#: widths would draw different masks and the variants' losses could not be compared).
_NO_DROPOUT: dict[str, dict[str, float]] = {
    "bert": {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0},
    "roberta": {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0},
    "albert": {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "classifier_dropout_prob": 0.0},
    "distilbert": {"dropout": 0.0, "attention_dropout": 0.0, "seq_classif_dropout": 0.0},
    "gpt2": {"resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0},
}
FAMILIES = tuple(_NO_DROPOUT)


def _config(shape: str, vocab: int, pad_id: int, family: str = "bert") -> Any:
    """The benchmark's config of ``family``: ``small`` (2 layers, hidden 128) or ``base`` (the hub model's shape,
    randomly initialised: no download), dropout off."""
    import transformers as tf

    common = {**_NO_DROPOUT[family], "num_labels": 2, "pad_token_id": pad_id}
    if shape == "base":  # bert-base-uncased's, roberta-base's, ... shape, randomly initialised (no download)
        base = {"bert": (tf.BertConfig, {"vocab_size": 30522}),
                "roberta": (tf.RobertaConfig, {"vocab_size": 50265, "max_position_embeddings": 514}),
                "albert": (tf.AlbertConfig, {"vocab_size": 30000, "hidden_size": 768, "num_attention_heads": 12,
                                             "intermediate_size": 3072}),
                "distilbert": (tf.DistilBertConfig, {"vocab_size": 30522}),
                "gpt2": (tf.GPT2Config, {})}[family]
        return base[0](**base[1], **common)
    small = {"hidden": 128, "layers": 2, "heads": 2, "intermediate": 512}
    if family == "gpt2":
        return tf.GPT2Config(vocab_size=vocab, n_embd=small["hidden"], n_layer=small["layers"], n_head=small["heads"],
                             n_positions=512, **common)
    if family == "distilbert":
        return tf.DistilBertConfig(vocab_size=vocab, dim=small["hidden"], n_layers=small["layers"],
                                   n_heads=small["heads"], hidden_dim=small["intermediate"], **common)
    cls = {"bert": tf.BertConfig, "roberta": tf.RobertaConfig, "albert": tf.AlbertConfig}[family]
    extra = {"max_position_embeddings": 514} if family == "roberta" else {"embedding_size": 64} if family == "albert" else {}
    return cls(vocab_size=vocab, hidden_size=small["hidden"], num_hidden_layers=small["layers"],
               num_attention_heads=small["heads"], intermediate_size=small["intermediate"], **extra, **common)


def _model(shape: str, tokenizer: Any, family: str) -> Any:
    from transformers import AutoModelForSequenceClassification

    return AutoModelForSequenceClassification.from_config(_config(shape, len(tokenizer), tokenizer.pad_token_id,
                                                                  family))


def run_variant(v: Variant, *, shape: str, family: str, tokenizer: Any, pairs: Any, state: dict[str, Any],
                steps: int, warmup: int, batch_size: int, max_length: int, device: str) -> dict[str, Any]:
    """Train ``warmup + steps`` steps of variant ``v``; time the last ``steps``."""
    import torch
    from transformers import (
        PrinterCallback,
        Trainer,
        TrainerCallback,
        TrainingArguments,
        default_data_collator,
        set_seed,
    )

    from harness.finetune.batching import choose_batching, make_collator
    from harness.finetune.callbacks import TokenAccountingCallback
    from harness.finetune.tasks import Split
    from harness.finetune.train import _tokenize

    set_seed(0)
    pad_to_max = v.padding == "max_length"
    ds = _tokenize(Split(*pairs), tokenizer, max_length, pad_to_max=pad_to_max)
    model = _model(shape, tokenizer, family)
    model.load_state_dict(state)
    batching = None if pad_to_max else choose_batching(model.config.model_type, v.padding)
    base = default_data_collator if pad_to_max else make_collator(tokenizer, batching)
    if batching is not None and batching["mode"] == "flattened":
        from harness.finetune.flat import enable_flat_forward

        enable_flat_forward(model)
    counts: list[tuple[int, int]] = []  # per batch: (real tokens, computed tokens)

    def collate(features: list[dict[str, Any]]) -> Any:
        batch = base(features)
        computed = int(batch["input_ids"].numel())
        real = batch.get("example_lengths", batch.get("attention_mask"))  # flattened: its examples' lengths
        counts.append((int(real.sum()) if real is not None else computed, computed))
        return batch

    marks: dict[str, float] = {}

    class Clock(TrainerCallback):
        def on_train_begin(self, args: Any, st: Any, control: Any, **kw: Any) -> None:
            marks["begin"] = time.perf_counter()

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
    accounting = TokenAccountingCallback()
    total = warmup + steps
    with tempfile.TemporaryDirectory() as out:
        kwargs: dict[str, Any] = {
            "output_dir": out, "max_steps": total, "per_device_train_batch_size": batch_size,
            "learning_rate": 2e-5, "weight_decay": 0.01, "save_strategy": "no", "eval_strategy": "no",
            "logging_strategy": "no", "report_to": "none", "disable_tqdm": True, "seed": 0, "data_seed": 0,
            "use_cpu": device == "cpu", "bf16": v.precision == "bf16", "fp16": v.precision == "fp16",
            "dataloader_num_workers": 0,
        }
        if v.optim is not None:
            kwargs["optim"] = v.optim
        if v.tf32:
            kwargs["tf32"] = True
        if v.compile:
            from harness.finetune.compilation import choose_compile, training_arguments

            kwargs.update(training_arguments(choose_compile("on", device)))
        trainer = Trainer(model=model, args=TrainingArguments(**kwargs), train_dataset=ds,
                          data_collator=collate, callbacks=[Clock(), accounting])
        trainer.remove_callback(PrinterCallback)  # no per-run log lines between the table's
        result = trainer.train()
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False  # do not leak TF32 into the next variant
        torch.backends.cudnn.allow_tf32 = False
    timed = counts[warmup:total]
    seconds = marks["t1"] - marks["t0"]
    real, computed = sum(c[0] for c in timed), sum(c[1] for c in timed)
    return {
        "variant": v.name,
        "compiled": v.compile,
        "batching": batching or {"mode": "max_length", "pad_to_multiple_of": None, "requested": "max_length"},
        "seconds": seconds,
        "warmup_s": marks["t0"] - marks["begin"],  # the untimed steps (a compiled variant's compile included)
        "samples_s": steps * batch_size / seconds,
        "tokens_s": real / seconds,
        "computed_tokens_s": computed / seconds,
        "real_tokens": real,
        "computed_tokens": computed,
        "padding_share": 1 - real / computed,
        "batch_widths": [c[1] // batch_size for c in timed],
        "accounting": accounting.result(),  # every step, warm-up included (what a record would carry)
        "collated": {"real_tokens": sum(c[0] for c in counts[:total]),
                     "computed_tokens": sum(c[1] for c in counts[:total])},
        "peak_mem_gib": (torch.cuda.max_memory_allocated() / 2**30) if device == "cuda" else None,
        "loss": float(result.training_loss),
    }


def run_fused(k: int, *, shape: str, family: str, tokenizer: Any, pairs: Any, state: dict[str, Any], steps: int,
              warmup: int, batch_size: int, max_length: int, device: str, capture: bool = False) -> dict[str, Any]:
    """``k`` runs of the same initial weights, seeds 0 … k-1 (each its own data order: run 0's is the Trainer's
    with seed 0), trained as one fused group (:mod:`harness.finetune.fused`) for ``warmup + steps`` steps; the
    last ``steps`` timed. Samples/s counts every run's samples (k × batch per step)."""
    import torch
    from transformers import Trainer

    from harness.finetune import fused
    from harness.finetune.tasks import Split
    from harness.finetune.train import _tokenize

    rows = list(_tokenize(Split(*pairs), tokenizer, max_length))
    models = []
    for _ in range(k):
        model = _model(shape, tokenizer, family)
        model.load_state_dict(state)
        models.append(model.to(device))
    stack = fused.StackedRuns(models, learning_rates=[2e-5] * k, weight_decays=[0.01] * k, regression=False,
                              decay=set(Trainer.get_decay_parameter_names(None, models[0])))
    del models
    marks: dict[str, float] = {"begin": time.perf_counter()}
    counts: list[tuple[int, int]] = []

    def on_step(step: int, batch: Any, losses: list[float]) -> None:
        counts.append((int(batch["attention_mask"][0].sum()), int(batch["attention_mask"][0].numel())))
        if step == warmup:
            if device == "cuda":
                torch.cuda.synchronize()
            marks["t0"] = time.perf_counter()

    if warmup == 0:
        marks["t0"] = time.perf_counter()
    out = fused.train_group(stack, [rows] * k, list(range(k)), batch_size=batch_size, total_steps=warmup + steps,
                            warmup=0, pad_id=tokenizer.pad_token_id, causal=family in fused.LAST_TOKEN,
                            on_step=on_step, capture=capture)
    if device == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - marks["t0"]
    timed = counts[warmup:]
    real, computed = sum(c[0] for c in timed), sum(c[1] for c in timed)  # run 0's batches
    first = [losses[0] for losses in out["losses"]]
    return {
        "variant": f"fused K={k}" + (", captured" if capture else ""), "compiled": capture,
        "batching": {"mode": "static" if capture else "bucketed", "pad_to_multiple_of": fused.PAD_MULTIPLE,
                     "requested": "auto", "fused": k},
        "seconds": seconds, "warmup_s": marks["t0"] - marks["begin"],
        "samples_s": k * steps * batch_size / seconds, "tokens_s": k * real / seconds,
        "computed_tokens_s": k * computed / seconds, "real_tokens": real, "computed_tokens": computed,
        "padding_share": 1 - real / computed if computed else None,
        "batch_widths": [c[1] // batch_size for c in timed], "accounting": None, "collated": None,
        "peak_mem_gib": (torch.cuda.max_memory_allocated() / 2**30) if device == "cuda" else None,
        "loss": sum(first) / len(first),  # run 0: the Trainer's seed-0 order, as every other variant
    }


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One variant over its rounds: min / median throughput; the counts and loss (the same every round)."""
    first = runs[0]
    keep = ("variant", "compiled", "batching", "real_tokens", "computed_tokens", "padding_share", "batch_widths", "accounting",
            "collated", "loss")
    out = {k: first[k] for k in keep}
    for key in ("samples_s", "tokens_s", "computed_tokens_s"):
        values = [r[key] for r in runs]
        out[key] = {"min": min(values), "median": statistics.median(values), "max": max(values), "rounds": values}
    out["losses"] = [r["loss"] for r in runs]
    out["warmup_s"] = [r["warmup_s"] for r in runs]
    out["peak_mem_gib"] = max((r["peak_mem_gib"] for r in runs if r["peak_mem_gib"] is not None), default=None)
    return out


def bench(shape: str, device: str, *, task: str, steps: int, warmup: int, rounds: int, batch_size: int,
          max_length: int, data_root: Path | None, family: str = "bert", compile_: bool = False,
          fuse: tuple[int, ...] = (), capture: bool = False) -> dict[str, Any]:
    """Every variant once per round, ``rounds`` rounds, the order rotated each round."""
    import torch
    from transformers import set_seed

    from harness.finetune.batching import FLAT_DECODERS, FLAT_ENCODERS
    from harness.finetune.train import runtime_settings
    from harness.models import load_tokenizer

    n = (warmup + steps) * batch_size
    a, b, y, source = _texts(task, data_root, n)
    tokenizer = load_tokenizer(f"tiny:{family}", texts=a + (b or []))
    set_seed(0)
    state = _model(shape, tokenizer, family).state_dict()
    state = {k: t.clone() for k, t in state.items()}
    ours = runtime_settings("auto")
    variants = [
        Variant("plain Trainer defaults", "max_length", "fp32", None),
        Variant("padded (to the longest)", "pad", ours["precision"], ours["optim"], tf32=ours["tf32"]),
        Variant("ours", "auto", ours["precision"], ours["optim"], tf32=ours["tf32"]),
    ]
    if family in FLAT_DECODERS or family in FLAT_ENCODERS:
        variants.append(Variant("flattened", "flatten", ours["precision"], ours["optim"], tf32=ours["tf32"]))
    if device == "cuda" and ours["precision"] != "fp32":
        variants.append(Variant("ours in fp32 (no bf16/TF32)", "auto", "fp32", ours["optim"]))
    if compile_:  # the compiled twins of ours and flattened
        variants += [Variant(f"{v.name}, compiled", v.padding, v.precision, v.optim, tf32=v.tf32, compile=True)
                     for v in list(variants) if v.name in ("ours", "flattened")]
    variants += [Variant(f"fused K={k}", "auto", "fp32", None) for k in fuse]  # harness.finetune.fused
    if capture:
        variants += [Variant(f"fused K={k}, captured", "auto", "fp32", None) for k in fuse]
    gpu = torch.cuda.get_device_name(0) if device == "cuda" else "none"
    threads = torch.get_num_threads()
    print(f"\n== {shape}-shaped {family} on {device} (GPU: {gpu}, {threads} CPU thread(s)); data: {source}; "
          f"batch {batch_size}, max_length {max_length}; {steps} timed steps per variant after {warmup} warm-up "
          f"steps; {rounds} interleaved rounds; ours = {ours['precision']}, tf32={ours['tf32']}, {ours['optim']}")
    common = {"shape": shape, "family": family, "tokenizer": tokenizer, "pairs": (a, b, y), "state": state, "steps": steps,
              "warmup": warmup, "batch_size": batch_size, "max_length": max_length, "device": device}
    load_before = os.getloadavg()
    runs: dict[str, list[dict[str, Any]]] = {v.name: [] for v in variants}
    for r in range(rounds):
        k = r % len(variants)
        for v in variants[k:] + variants[:k]:
            if v.name.startswith("fused K="):
                size, _, captured = v.name.removeprefix("fused K=").partition(", ")
                runs[v.name].append(run_fused(int(size), capture=bool(captured), **common))
            else:
                runs[v.name].append(run_variant(v, **common))
    load_after = os.getloadavg()
    rows = [_summary(runs[v.name]) for v in variants]
    for row in rows:
        _print_row(row)
    by = {row["variant"]: row for row in rows}
    plain, padded, mine = by["plain Trainer defaults"], by["padded (to the longest)"], by["ours"]
    ratios = {"ours_over_plain": mine["samples_s"]["median"] / plain["samples_s"]["median"],
              "ours_over_padded": mine["samples_s"]["median"] / padded["samples_s"]["median"]}
    if "flattened" in by:
        ratios["flattened_over_ours"] = by["flattened"]["samples_s"]["median"] / mine["samples_s"]["median"]
        ratios["flattened_over_padded"] = by["flattened"]["samples_s"]["median"] / padded["samples_s"]["median"]
        print(f"median samples/s: flattened / ours (bucketed) = {ratios['flattened_over_ours']:.2f}x, flattened / "
              f"padded = {ratios['flattened_over_padded']:.2f}x")
    for k in fuse:
        ratios[f"fused_{k}_over_ours"] = by[f"fused K={k}"]["samples_s"]["median"] / mine["samples_s"]["median"]
    if fuse:
        print("median samples/s, fused K runs as one stacked model / ours (one run at a time): " + ", ".join(
            f"K={k} {ratios[f'fused_{k}_over_ours']:.2f}x" for k in fuse))
    if capture:
        for k in fuse:
            twin = by[f"fused K={k}, captured"]
            ratios[f"fused_{k}_captured_over_eager"] = (twin["samples_s"]["median"]
                                                       / by[f"fused K={k}"]["samples_s"]["median"])
        print("median samples/s, captured / eager fused step: " + ", ".join(
            f"K={k} {ratios[f'fused_{k}_captured_over_eager']:.2f}x (warm-up with the compile "
            f"{statistics.median(by[f'fused K={k}, captured']['warmup_s']):.1f} s against "
            f"{statistics.median(by[f'fused K={k}']['warmup_s']):.1f} s)" for k in fuse))
    for name in ("ours", "flattened"):
        if f"{name}, compiled" in by:
            twin = by[f"{name}, compiled"]
            ratios[f"{name}_compiled_over_eager"] = twin["samples_s"]["median"] / by[name]["samples_s"]["median"]
            print(f"median samples/s: {name} compiled / eager = {ratios[f'{name}_compiled_over_eager']:.2f}x; "
                  f"{warmup} warm-up steps per round (the compile in its first round) took "
                  f"{', '.join(f'{w:.1f}' for w in twin['warmup_s'])} s against "
                  f"{', '.join(f'{w:.1f}' for w in by[name]['warmup_s'])} s eager")
    print(f"median samples/s: ours / plain = {ratios['ours_over_plain']:.2f}x, ours / padded = "
          f"{ratios['ours_over_padded']:.2f}x; load average before {load_before[0]:.2f}, after {load_after[0]:.2f} "
          f"(other processes share this machine: ratios within ~10 % are noise)")
    tol = 1e-5 if ours["precision"] == "fp32" else 5e-2  # relative (fused rows: 1e-4, see tests/test_fused.py)
    diffs = {row["variant"]: abs(row["loss"] - plain["loss"]) / (10.0 if row["variant"].startswith("fused") else 1.0)
             for row in rows}
    ok = all(d <= tol * max(1.0, abs(plain["loss"])) for d in diffs.values())
    losses = ", ".join(f"{row['loss']:.6f}" for row in rows)
    print(f"sanity: training losses {losses} (max |diff| to plain {max(diffs.values()):.2e}, relative tolerance "
          f"{tol:g}): {'OK' if ok else 'MISMATCH'}")
    if not ok:
        raise SystemExit("the variants disagree on the training loss: they did not train on the same examples")
    return {"shape": shape, "family": family, "device": device, "gpu": gpu, "threads": threads, "data": source,
            "batch_size": batch_size, "max_length": max_length, "steps": steps, "warmup": warmup, "rounds": rounds,
            "ours": ours, "rows": rows, "ratios": ratios, "loadavg_before": list(load_before),
            "loadavg_after": list(load_after),
            "sanity": {"losses": {row["variant"]: row["loss"] for row in rows}, "tolerance": tol, "ok": ok}}


def _print_row(r: dict[str, Any]) -> None:
    s, t = r["samples_s"], r["tokens_s"]
    mem = f"  peak {r['peak_mem_gib']:.2f} GiB" if r["peak_mem_gib"] is not None else ""
    print(f"{r['variant']:<28} samples/s min {s['min']:>7.1f} median {s['median']:>7.1f} max {s['max']:>7.1f} | "
          f"real tokens/s min {t['min']:>8.0f} median {t['median']:>8.0f} max {t['max']:>8.0f} | padding {100 * r['padding_share']:5.1f} % "
          f"({r['batching']['mode']}){mem} | loss {r['loss']:.6f}")


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
          f"{out['sample_pct_of_run']:.3f}% of a run's time")
    return out


# ---------------------------------------------------------------------- padding report
def _batches(lengths: list[int], order: list[int], batch_size: int) -> list[list[int]]:
    """The lengths of each batch when ``order`` is cut into batches of ``batch_size``."""
    return [[lengths[i] for i in order[k:k + batch_size]] for k in range(0, len(order), batch_size)]


def padding_report(data_root: Path, *, batch_size: int = 32, max_length: int = 128, seed: int = 0,
                   tasks: tuple[str, ...] = PADDING_TASKS) -> list[dict[str, Any]]:
    """Padding share per GLUE task under each batch order / layout (one epoch of the task's largest split)."""
    import torch
    from transformers.trainer_pt_utils import LengthGroupedSampler

    from harness.finetune.batching import (
        PAD_MULTIPLE,
        best_fit_rows_share,
        flattened_share,
        packed_rows_share,
        padding_share,
    )
    from harness.finetune.tasks import get_task, glue_dir, load_local, local_folder, read_glue_tsv
    from harness.models import train_tiny_tokenizer

    rows = []
    print(f"\n== padding share of computed tokens at batch {batch_size}, max_length {max_length} (one epoch; "
          "WordPiece tokenizer of 30,522 pieces trained on the task's texts)")
    print(f"{'task':<6} {'split':<6} {'examples':>8} {'mean len':>8} {'random':>8} {'random/8':>9} "
          f"{'grouped':>8} {'flattened':>9} {'rows/order':>11} {'rows/best':>10}")
    for name in tasks:
        task = get_task(name)
        if local_folder(task, data_root) is not None:
            split, which = load_local(task, data_root).train, "train"
        else:  # the shared data holds QNLI's dev set only
            split, which = read_glue_tsv(task, glue_dir(data_root) / task.dir_name / "dev.tsv"), "dev"
        tokenizer = train_tiny_tokenizer("bert", split.texts(), vocab_size=30522)
        args = (split.text_a, split.text_b) if split.text_b is not None else (split.text_a,)
        lengths = [len(ids) for ids in tokenizer(*args, truncation=True, max_length=max_length)["input_ids"]]
        gen = torch.Generator().manual_seed(seed)
        order = torch.randperm(len(lengths), generator=gen).tolist()
        grouped = list(LengthGroupedSampler(batch_size, lengths=lengths, generator=torch.Generator().manual_seed(seed)))

        row = {"task": task.name, "split": which, "examples": len(lengths), "mean_length": sum(lengths) / len(lengths),
               "random": padding_share(_batches(lengths, order, batch_size)),
               "random_bucketed": padding_share(_batches(lengths, order, batch_size), PAD_MULTIPLE),
               "length_grouped": padding_share(_batches(lengths, grouped, batch_size)),
               "flattened": flattened_share(_batches(lengths, order, batch_size), PAD_MULTIPLE),
               "packed_rows_in_order": packed_rows_share([lengths[i] for i in order], max_length),
               "packed_rows_best_fit": best_fit_rows_share(lengths, max_length)}
        rows.append(row)
        print(f"{row['task']:<6} {which:<6} {row['examples']:>8} {row['mean_length']:>8.1f} "
              + " ".join(f"{100 * row[k]:>{w}.1f}%" for k, w in (("random", 7), ("random_bucketed", 8),
                                                                   ("length_grouped", 7), ("flattened", 8),
                                                                   ("packed_rows_in_order", 10),
                                                                   ("packed_rows_best_fit", 9))))
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="12 timed steps, CPU only (for tests)")
    p.add_argument("--steps", type=int, help="timed optimizer steps per variant and round (default 100; quick 12)")
    p.add_argument("--warmup", type=int, help="untimed steps before them (default 5; quick 2)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default %(default)s, at least 3)")
    p.add_argument("--family", choices=FAMILIES, default="bert",
                   help="model family (each adds the flattened variant: harness.finetune.flat); default %(default)s")
    p.add_argument("--task", default="sst2,rte",
                   help="GLUE task(s) whose train texts are used, comma-separated, one benchmark each "
                        "(default %(default)s: short single sentences, then long pairs)")
    p.add_argument("--data-root", help="data root with glue/ (default $VNR_DATA_ROOT or ../shared/data)")
    p.add_argument("--no-gpu", action="store_true", help="skip the GPU benchmark even where a GPU exists")
    p.add_argument("--padding-report", action="store_true",
                   help="print the padding share per GLUE task at batch 32 instead of timing")
    p.add_argument("--compile", action="store_true",
                   help="also time ours and flattened with the training step compiled (compile: on), beside them")
    p.add_argument("--fuse", default="",
                   help="also time K runs fused into one stacked model (harness.finetune.fused) for each K given, "
                        "comma-separated, e.g. 1,2,5,10; samples/s counts all K runs' samples")
    p.add_argument("--capture", action="store_true",
                   help="with --fuse: also time each fused group with its whole step captured (capture: on)")
    p.add_argument("--json", action="store_true",
                   help="print one JSON document with every measured value on stdout (the table goes to stderr)")
    args = p.parse_args(argv)
    for name in ("steps", "warmup"):
        value = getattr(args, name)
        if value is not None and value < (1 if name == "steps" else 0):
            p.error(f"--{name} must be {'positive' if name == 'steps' else 'at least 0'}")
    try:
        args.fuse = tuple(int(k) for k in str(args.fuse).split(",") if k.strip())
    except ValueError:
        args.fuse = (0,)
    if any(k < 1 for k in args.fuse):
        p.error("--fuse: group sizes K >= 1, comma-separated, e.g. 1,2,5,10")
    if args.capture and not args.fuse:
        p.error("--capture times captured fused groups: give --fuse K,... too")
    if args.rounds < 3:
        p.error("--rounds must be at least 3 (interleaved rounds are what makes the comparison trustworthy)")
    if args.json:
        with contextlib.redirect_stdout(sys.stderr):
            report = run(args)
        print(json.dumps(report, indent=2))
    else:
        run(args)
    return 0


def _data_root(given: str | None) -> Path | None:
    root = given or os.environ.get("VNR_DATA_ROOT")
    if root is None:
        candidate = Path(__file__).resolve().parents[2] / "shared" / "data"
        root = str(candidate) if candidate.is_dir() else None
    return Path(root) if root else None


def run(args: argparse.Namespace) -> dict[str, Any]:
    import logging

    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    logging.getLogger("codecarbon").setLevel(logging.ERROR)
    data_root = _data_root(args.data_root)
    if args.padding_report:
        if data_root is None:
            raise SystemExit("--padding-report needs the GLUE data: give --data-root or set VNR_DATA_ROOT")
        return {"padding_report": padding_report(data_root)}
    torch.set_num_threads(1)  # one thread: timings that do not depend on what else runs on the other cores
    steps = args.steps or (12 if args.quick else 100)
    warmup = args.warmup if args.warmup is not None else (2 if args.quick else 5)
    tasks = [t.strip() for t in args.task.split(",") if t.strip()]
    results = [bench("small", "cpu", task=task, steps=steps, warmup=warmup, rounds=args.rounds, batch_size=16,
                     max_length=128, data_root=data_root, family=args.family, compile_=args.compile,
                     fuse=args.fuse, capture=args.capture)
               for task in tasks]
    gpu = torch.cuda.is_available() and not args.quick and not args.no_gpu
    if gpu:
        for task in tasks:
            results.append(bench("base", "cuda", task=task, steps=args.steps or 200, warmup=20, rounds=args.rounds,
                                 batch_size=16, max_length=128, data_root=data_root, family=args.family,
                                 compile_=args.compile, fuse=args.fuse, capture=args.capture))
    elif not torch.cuda.is_available():
        print("\n(no CUDA GPU here: GPU benchmark skipped)")
    return {"benchmarks": results, "tracker_cost": tracker_cost("cuda" if gpu else "cpu")}


if __name__ == "__main__":
    sys.exit(main())
