"""Benchmark: a flattened encoder batch per attention backend, beside the padded batch, on the device this runs on.

The same model (BERT, randomly initialised from its config and a WordPiece vocabulary trained on the task's
texts: nothing is downloaded), the same GLUE examples (``--task``'s train split from the data root, shuffled
once with seed 0), the same batches, one training step each (forward, backward, AdamW), for:

* ``padded``: the straightforward way, each batch padded to its longest example, the class's own forward
  with ``attention_mask`` (sdpa);
* ``bucketed``: ``padding: bucket`` (padded to a multiple of 8), sdpa;
* ``flattened (<backend>)``: ``padding: flatten`` (:mod:`harness.finetune.flat`), for each backend of
  ``--backends`` this torch/transformers can run: ``sdpa`` (boolean block-diagonal mask), ``eager`` (additive
  mask), ``flex_attention`` (a BlockMask; compiled by transformers on first use, inside the warm-up),
  ``flash_attention_2``/``_3`` (varlen kernels, ``cu_seq_lens``: only where the flash package is installed;
  a backend that is not is listed as skipped, with why).

Each variant starts from the same initial weights (a fresh copy per round); ``--rounds`` interleaved rounds
(the order rotated each round), ``--warmup`` untimed steps then ``--steps`` timed ones, the device synchronised
around the timed ones. Printed per variant: median samples/s and real tokens/s over the rounds, the share of
computed tokens that are padding, the speed-up over ``padded``, and how far the variant's first-batch loss and
logits are from the padded batch's (in fp32 without dropout, before training: the same numbers up to rounding,
or the variant is wrong). ``--precision`` is ``bf16`` on a CUDA GPU (autocast) and ``fp32`` on a CPU.

    python scripts/bench_attention.py                               # CUDA GPU: bert-base, SST-2 then RTE
    python scripts/bench_attention.py --cpu --shape small --steps 4 # checks the script on the CPU
    python scripts/bench_attention.py --json                        # one JSON document on stdout
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

BACKENDS = ("sdpa", "eager", "flex_attention", "flash_attention_2", "flash_attention_3")


def available(backend: str) -> str | None:
    """None if this installation can run ``backend`` on the chosen device, else why not (one line)."""
    import transformers.utils as tu

    if backend in ("sdpa", "eager"):
        return None
    if backend == "flex_attention":
        return None if _has_flex() else "this torch has no flex_attention"
    check = {"flash_attention_2": "is_flash_attn_2_available", "flash_attention_3": "is_flash_attn_3_available"}[backend]
    fn = getattr(tu, check, None)
    return None if fn is not None and fn() else f"{backend}: the flash-attn package is not installed here"


def _has_flex() -> bool:
    try:
        import torch.nn.attention.flex_attention  # noqa: F401
    except ImportError:
        return False
    return True


def build(shape: str, texts: list[str]) -> tuple[Any, Any]:
    """(model in fp32, tokenizer): BERT of ``shape`` (bert-base or the tiny one) on a vocabulary of ``texts``."""
    import torch
    import transformers as tf

    from harness.models import tiny_config, train_tiny_tokenizer

    torch.manual_seed(0)
    if shape == "small":
        tokenizer = train_tiny_tokenizer("bert", texts)
        config = tiny_config("bert", tokenizer)
    else:
        tokenizer = train_tiny_tokenizer("bert", texts, vocab_size=30522)
        config = tf.BertConfig(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id)
    config.num_labels = 2
    return tf.BertForSequenceClassification(config).float(), tokenizer


def batches_of(task: str, data_root: Path | None, tokenizer: Any, *, batch_size: int, n_batches: int,
               max_length: int) -> list[list[dict[str, Any]]]:
    """``n_batches`` batches of tokenized train examples, in one seeded random order."""
    import random

    from harness.finetune.tasks import load_task

    split = load_task(task, data_root).train
    order = list(range(len(split)))
    random.Random(0).shuffle(order)
    order = order[: batch_size * n_batches]
    a = [split.text_a[i] for i in order]
    b = [split.text_b[i] for i in order] if split.text_b is not None else None
    enc = tokenizer(a, b, truncation=True, max_length=max_length) if b else tokenizer(a, truncation=True,
                                                                                      max_length=max_length)
    feats = [{**{k: enc[k][i] for k in enc}, "labels": int(split.label[order[i]])} for i in range(len(order))]
    return [feats[i:i + batch_size] for i in range(0, len(feats), batch_size)]


def variants(backends: list[str]) -> list[tuple[str, str, str]]:
    """(name, padding, attention backend) per variant; the padded batch first."""
    out = [("padded", "pad", "sdpa"), ("bucketed", "bucket", "sdpa")]
    return out + [(f"flattened ({b})", "flatten", b) for b in backends]


def prepared(model: Any, padding: str, backend: str, device: str) -> Any:
    from harness.finetune.flat import enable_flat_forward

    m = copy.deepcopy(model).to(device)
    m.set_attn_implementation(backend)
    if padding == "flatten":
        enable_flat_forward(m)
    return m


def collate(tokenizer: Any, padding: str, batch: list[dict[str, Any]], device: str) -> dict[str, Any]:
    from harness.finetune.batching import choose_batching, make_collator

    out = make_collator(tokenizer, choose_batching("bert", padding))(batch)
    return {k: v.to(device) if hasattr(v, "to") else v for k, v in out.items()}


def computed_tokens(batch: dict[str, Any]) -> int:
    return int(batch["input_ids"].numel())


def agreement(model: Any, tokenizer: Any, batch: list[dict[str, Any]], name: str, padding: str, backend: str,
              device: str) -> dict[str, float]:
    """The variant's loss and logits on one batch against the padded batch's: fp32, eval mode (no dropout)."""
    import torch

    ref = prepared(model, "pad", "sdpa", device).eval()
    m = prepared(model, padding, backend, device).eval()
    with torch.no_grad():
        p = ref(**collate(tokenizer, "pad", batch, device))
        f = m(**collate(tokenizer, padding, batch, device))
    return {"loss_rel_diff": abs(float(f.loss) - float(p.loss)) / abs(float(p.loss)),
            "logits_max_abs_diff": float((f.logits.float() - p.logits.float()).abs().max())}


def time_variant(model: Any, tokenizer: Any, batches: list[list[dict[str, Any]]], padding: str, backend: str,
                 device: str, precision: str, warmup: int) -> dict[str, float]:
    import torch

    m = prepared(model, padding, backend, device).train()
    opt = torch.optim.AdamW(m.parameters(), lr=2e-5)
    cast = (lambda: torch.autocast("cuda", dtype=torch.bfloat16)) if precision == "bf16" else contextlib.nullcontext
    ready = [collate(tokenizer, padding, b, device) for b in batches]

    def step(batch: dict[str, Any]) -> None:
        with cast():
            loss = m(**batch).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for batch in ready[:warmup]:
        step(batch)
    timed = ready[warmup:]
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    for batch in timed:
        step(batch)
    sync()
    seconds = time.perf_counter() - t0
    real = sum(int((b["input_ids"] != tokenizer.pad_token_id).sum()) for b in timed)
    computed = sum(computed_tokens(b) for b in timed)
    examples = sum(int(b["labels"].numel()) for b in timed)
    return {"samples_s": examples / seconds, "real_tokens_s": real / seconds, "padding_share": 1 - real / computed}


def run(opts: argparse.Namespace) -> dict[str, Any]:
    import torch

    from harness.finetune.tasks import load_task
    from ranking.floor.paths import resolve_data_root

    device = "cpu" if opts.cpu or not torch.cuda.is_available() else "cuda"
    precision = opts.precision or ("bf16" if device == "cuda" else "fp32")
    data_root = resolve_data_root(opts.data_root)
    wanted = [b.strip() for b in opts.backends.split(",") if b.strip()]
    skipped = {b: why for b in wanted if (why := available(b))}
    backends = [b for b in wanted if b not in skipped]
    report: dict[str, Any] = {"device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu",
                              "precision": precision, "shape": opts.shape, "skipped": skipped, "tasks": []}
    print(f"device {report['device']}, {precision}, BERT {opts.shape}, batch {opts.batch_size}, max_length "
          f"{opts.max_length}, {opts.warmup} warm-up + {opts.steps} timed steps, {opts.rounds} rounds")
    for name, why in skipped.items():
        print(f"  skipped {name}: {why}")
    for task in [t.strip() for t in opts.task.split(",") if t.strip()]:
        split = load_task(task, data_root).train
        model, tokenizer = build(opts.shape, split.text_a + (split.text_b or []))
        batches = batches_of(task, data_root, tokenizer, batch_size=opts.batch_size,
                             n_batches=opts.warmup + opts.steps, max_length=opts.max_length)
        plan = variants(backends)
        rows: dict[str, list[dict[str, float]]] = {v[0]: [] for v in plan}
        agree = {v[0]: agreement(model, tokenizer, batches[0], *v, device) for v in plan}
        for r in range(opts.rounds):
            k = r % len(plan)
            for vname, padding, backend in plan[k:] + plan[:k]:
                if vname in report["skipped"]:
                    continue
                try:
                    rows[vname].append(time_variant(model, tokenizer, batches, padding, backend, device, precision,
                                                    opts.warmup))
                except ValueError as exc:  # e.g. transformers' flex_attention refuses attention dropout in training
                    report["skipped"][vname] = f"does not train: {str(exc).splitlines()[0]}"
                    print(f"  skipped {vname} (training): {report['skipped'][vname]}")
        base = statistics.median(x["samples_s"] for x in rows["padded"])
        out = []
        print(f"\n{task}: variant                      samples/s  real tok/s  padding  vs padded  loss rel diff  "
              "logits max diff")
        for vname, *_ in plan:
            if not rows[vname]:
                out.append({"variant": vname, "skipped": report["skipped"][vname], **agree[vname]})
                print(f"{task}: {vname:<28} {'(not timed: ' + report['skipped'][vname][:40] + ')':<49} "
                      f"{agree[vname]['loss_rel_diff']:>14.2e} {agree[vname]['logits_max_abs_diff']:>16.2e}")
                continue
            med = statistics.median(x["samples_s"] for x in rows[vname])
            row = {"variant": vname, "samples_s": med,
                   "real_tokens_s": statistics.median(x["real_tokens_s"] for x in rows[vname]),
                   "padding_share": rows[vname][0]["padding_share"], "speedup": med / base,
                   "rounds_samples_s": [x["samples_s"] for x in rows[vname]], **agree[vname]}
            out.append(row)
            print(f"{task}: {vname:<28} {med:>9.1f} {row['real_tokens_s']:>11.0f} {100 * row['padding_share']:>7.1f}% "
                  f"{row['speedup']:>9.2f}x {row['loss_rel_diff']:>14.2e} {row['logits_max_abs_diff']:>16.2e}")
        report["tasks"].append({"task": task, "variants": out})
    return report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", choices=("bert-base", "small"), default=None,
                   help="bert-base (default on a GPU) or the tiny BERT (default on a CPU)")
    p.add_argument("--task", default="sst2,rte", help="GLUE tasks, comma-separated (default %(default)s)")
    p.add_argument("--backends", default=",".join(BACKENDS), help="attention backends of the flattened variants "
                   "(default %(default)s; one this installation cannot run is listed as skipped)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--steps", type=int, default=30, help="timed steps per variant and round (default %(default)s)")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (default %(default)s)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default %(default)s)")
    p.add_argument("--precision", choices=("fp32", "bf16"), default=None, help="default bf16 on a GPU, fp32 on a CPU")
    p.add_argument("--data-root", default=None, help="data root with glue/ (default $VNR_DATA_ROOT)")
    p.add_argument("--cpu", action="store_true", help="run on the CPU (checks the script)")
    p.add_argument("--json", action="store_true", help="one JSON document on stdout (the table goes to stderr)")
    opts = p.parse_args(argv)
    if opts.steps < 1 or opts.warmup < 0 or opts.rounds < 1:
        p.error("--steps and --rounds must be positive, --warmup at least 0")
    import torch

    if opts.shape is None:
        opts.shape = "bert-base" if torch.cuda.is_available() and not opts.cpu else "small"
    if opts.precision == "bf16" and (opts.cpu or not torch.cuda.is_available()):
        p.error("--precision bf16 needs a CUDA GPU here")
    if opts.json:
        with contextlib.redirect_stdout(sys.stderr):
            report = run(opts)
        print(json.dumps(report, indent=2))
    else:
        run(opts)
    return 0


if __name__ == "__main__":
    sys.exit(main())
