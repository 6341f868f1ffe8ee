"""Benchmark: batched CrowS-Pairs scoring against the one-forward-per-masked-token loop.

Same model (a randomly initialised bert-base-shaped BertForMaskedLM: 12
layers, hidden 768, vocabulary 30522), same pairs, same shared-token
alignment; prints both side by side, checks that the scores agree, and
reports the time ratio and tokens/s.

    python scripts/bench_bias.py            # CPU: 6 pairs (a couple of minutes on this 2-core machine)
    python scripts/bench_bias.py --quick    # CPU: 4 pairs, a small model (what the tests run)
    python scripts/bench_bias.py --full     # GPU: all 1508 pairs (reference loop timed on a subset)

On a GPU ours also scores the pairs in bf16 beside fp32 (the default: exact,
no TF32) and reports their agreement (pairs with the same preferred sentence,
max |Δ| of the scores), so the default stays measured; with ``--full`` the
whole of CrowS-Pairs is scored in both, and the reference loop (fp32, as the
published scripts) is timed on ``--ref-pairs`` pairs and extrapolated.
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.bias.align import shared_token_positions  # noqa: E402
from harness.bias.data import load_crows_pairs  # noqa: E402
from ranking.floor.paths import resolve_data_root  # noqa: E402


def build_model(texts: list[str], quick: bool):
    """A bert-base-shaped masked LM (random weights) and a WordPiece tokenizer trained on ``texts``."""
    import torch
    import transformers as tf

    from harness.models import train_tiny_tokenizer

    tokenizer = train_tiny_tokenizer("bert", texts, vocab_size=30522)
    if quick:
        config = tf.BertConfig(vocab_size=30522, hidden_size=256, num_hidden_layers=4, num_attention_heads=4,
                               intermediate_size=1024)
    else:
        config = tf.BertConfig(vocab_size=30522)  # bert-base: 12 × 768, 12 heads, 3072
    torch.manual_seed(0)
    model = tf.BertForMaskedLM(config).eval()
    return model, tokenizer


def reference_scores(model, tokenizer, pairs, device, dtype):
    """What the published implementations do: per pair, per shared token, one forward (batch 1, full LM head)."""
    import torch

    model = model.to(device=device, dtype=dtype)
    out = []
    passes = tokens = 0
    with torch.inference_mode():
        for p in pairs:
            a = tokenizer(p.sent_more, return_special_tokens_mask=True)
            b = tokenizer(p.sent_less, return_special_tokens_mask=True)
            skip_a = {i for i, s in enumerate(a["special_tokens_mask"]) if s}
            skip_b = {i for i, s in enumerate(b["special_tokens_mask"]) if s}
            pa, pb = shared_token_positions(a["input_ids"], b["input_ids"], skip_a, skip_b)
            scores = []
            for enc, positions in ((a, pa), (b, pb)):
                ids = torch.tensor([enc["input_ids"]], device=device)
                total = 0.0
                for pos in positions:
                    masked = ids.clone()
                    masked[0, pos] = tokenizer.mask_token_id
                    logits = model(input_ids=masked).logits[0]  # the full LM head, at every position
                    total += torch.log_softmax(logits[pos].float(), dim=-1)[ids[0, pos]].item()
                    passes += 1
                    tokens += ids.shape[1]
                scores.append(total)
            out.append(scores)
    return np.array(out), passes, tokens


def ours(model, tokenizer, pairs, device, precision, batch_tokens):
    from harness.bias.run import evaluate_crows_pairs
    from harness.bias.scoring import MaskedLMScorer

    if precision != "fp32":
        model = copy.deepcopy(model)  # the scorer casts the model it gets; keep the fp32 weights intact
    scorer = MaskedLMScorer(model, tokenizer, precision=precision, batch_tokens=batch_tokens, device=device)
    scorer._check_split()
    frame = evaluate_crows_pairs(scorer, pairs).frame
    return frame[["score_more", "score_less"]].to_numpy(), scorer


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed(fn, device):
    _sync(device)
    t0 = time.perf_counter()
    result = fn()
    _sync(device)
    return result, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-root", help="data root (default $VNR_DATA_ROOT, else ../shared/data)")
    ap.add_argument("--pairs", type=int, help="CrowS-Pairs pairs for the side-by-side run (default 6 on CPU, --ref-pairs on GPU; quick 4)")
    ap.add_argument("--quick", action="store_true", help="a 4-layer model and 4 pairs (seconds)")
    ap.add_argument("--full", action="store_true", help="GPU: score all 1508 pairs with ours")
    ap.add_argument("--ref-pairs", type=int, default=60, help="GPU: pairs the reference loop is timed on")
    ap.add_argument("--batch-tokens", type=int, help="token budget per forward (default: the scorer's)")
    ap.add_argument("--device", help="cpu or cuda (default: cuda when available)")
    ap.add_argument("--threads", type=int, default=1,
                    help="CPU threads for both sides (default 1: on a shared machine more threads spin-wait)")
    args = ap.parse_args(argv)

    import torch

    torch.set_num_threads(max(1, args.threads))

    root = resolve_data_root(args.data_root)
    if root is None:
        guess = Path(__file__).resolve().parents[2] / "shared" / "data"
        root = guess if guess.is_dir() else None
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    all_pairs = load_crows_pairs(root)
    texts = [s for p in all_pairs for s in (p.sent_more, p.sent_less)]
    model, tokenizer = build_model(texts, args.quick)
    n_params = sum(p.numel() for p in model.parameters()) / 1e6
    print(f"device: {device} ({torch.cuda.get_device_name(0) if device.startswith('cuda') else os.cpu_count()} "
          f"{'GPU' if device.startswith('cuda') else 'CPU cores'}), torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}")
    print(f"model: BertForMaskedLM {'(quick, 4 × 256)' if args.quick else 'bert-base shape (12 × 768)'}, "
          f"vocab 30522, {n_params:.1f}M parameters, random weights")

    n = args.pairs or (4 if args.quick else (args.ref_pairs if device.startswith("cuda") else 6))
    pairs = all_pairs[:n]
    # warm-up both paths on one pair (allocator, kernels) so neither pays first-call costs
    reference_scores(model, tokenizer, pairs[:1], device, torch.float32)
    ours(model, tokenizer, pairs[:1], device, "fp32", args.batch_tokens)

    (ref, passes, ref_tokens), t_ref = timed(lambda: reference_scores(model, tokenizer, pairs, device, torch.float32), device)
    (got, scorer), t_ours = timed(lambda: ours(model, tokenizer, pairs, device, "fp32", args.batch_tokens), device)
    diff = float(np.abs(ref - got).max())
    same = bool(((ref[:, 0] > ref[:, 1]) == (got[:, 0] > got[:, 1])).all())
    s = scorer.stats
    print(f"\nCrowS-Pairs, first {n} pairs, fp32")
    print(f"{'':34}{'reference loop':>18}{'ours (batched)':>18}")
    print(f"{'forward passes':34}{passes:>18}{s['forward_passes']:>18}")
    print(f"{'masked rows':34}{passes:>18}{s['rows']:>18}")
    print(f"{'tokens through the encoder':34}{ref_tokens:>18}{s['padded_tokens']:>18}")
    print(f"{'time (s)':34}{t_ref:>18.2f}{t_ours:>18.2f}")
    print(f"{'real tokens/s':34}{ref_tokens / t_ref:>18.0f}{s['real_tokens'] / t_ours:>18.0f}")
    print(f"max |score difference| = {diff:.2e}; same preferred sentence in every pair: {same}")
    print(f"speed-up: {t_ref / t_ours:.1f}x (batch_tokens={scorer.batch_tokens})")
    ok = diff <= 1e-3 and same

    if device.startswith("cuda"):
        scored = all_pairs if args.full else all_pairs[:n]
        print(f"\nCrowS-Pairs ({len(scored)} pairs) on {torch.cuda.get_device_name(0)}: bf16 against fp32 (the default)")
        per_pair_ref = t_ref / n
        print(f"reference loop (fp32), extrapolated from {n} pairs: {per_pair_ref * len(scored):.0f} s")
        results = {}
        for precision in ("bf16", "fp32"):
            ours(model, tokenizer, scored[:50], device, precision, args.batch_tokens)  # warm-up at this precision
            (scores, sc), t = timed(lambda p=precision: ours(model, tokenizer, scored, device, p, args.batch_tokens), device)
            results[precision] = scores
            st = sc.stats
            print(f"ours ({precision}): {t:.2f} s, {st['forward_passes']} forward passes, {st['rows']} masked rows, "
                  f"{st['real_tokens'] / t:,.0f} tokens/s ({st['padded_tokens'] / t:,.0f} padded), "
                  f"batch_tokens={sc.batch_tokens}, speed-up vs loop {per_pair_ref * len(scored) / t:.0f}x")
        b, f = results["bf16"], results["fp32"]
        agree = float(((b[:, 0] > b[:, 1]) == (f[:, 0] > f[:, 1])).mean() * 100)
        print(f"bf16 vs fp32: max |score diff| {np.abs(b - f).max():.3f}, same preference in {agree:.1f}% of pairs; "
              f"fp32 metric_score {100 * (f[:, 0] > f[:, 1]).mean():.2f}, bf16 {100 * (b[:, 0] > b[:, 1]).mean():.2f}")
    print("\nOK: scores agree" if ok else "\nMISMATCH: scores disagree")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
