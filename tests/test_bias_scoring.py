"""Batched LM scoring equals the plain one-mask-per-forward loop, for every tiny family."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from harness.bias.align import shared_token_positions  # noqa: E402
from harness.bias.scoring import (  # noqa: E402
    CausalLMScorer,
    MaskedLMScorer,
    MaskQuery,
    make_scorer,
    pack_batches,
    split_masked_lm,
)
from harness.models import load_model  # noqa: E402
from ranking.floor.errors import UserError  # noqa: E402

SENTENCES = [
    "The poor are really ignorant about how to handle the money they do have.",
    "The rich are really ignorant about how to handle the money they do have.",
    "He couldn't figure out the issue with the rope.",
    "She was a nurse.",
    "Hi.",
    "The developer argued with the designer because she did not like it.",
    "Zyx qwv!",  # rare characters: pieces / unknown tokens
    "The mechanic gave the clerk a present because she won the lottery, and everyone cheered.",
]
MASKED = ("bert", "roberta", "albert", "deberta", "distilbert")
TOL = 1e-4


@pytest.fixture(scope="module", params=[*MASKED, "gpt2"])
def tiny(request):
    family = request.param
    head = "causal_lm" if family == "gpt2" else "masked_lm"
    model, tokenizer, info = load_model(f"tiny:{family}", head, texts=SENTENCES * 3, seed=0)
    return family, model, tokenizer, info


def reference_pll(model, tokenizer, text, positions=None):
    """The reference implementations' loop: one forward pass per masked token, full LM head, batch of one."""
    enc = tokenizer(text, return_special_tokens_mask=True)
    ids = torch.tensor([enc["input_ids"]])
    if positions is None:
        positions = [p for p, s in enumerate(enc["special_tokens_mask"]) if not s]
    total = 0.0
    with torch.no_grad():
        for p in positions:
            masked = ids.clone()
            masked[0, p] = tokenizer.mask_token_id
            logits = model(input_ids=masked).logits[0, p]
            total += torch.log_softmax(logits.float(), -1)[ids[0, p]].item()
    return total


def reference_logprob(model, tokenizer, text, context=None):
    """log p(text) (or log p(text | context)) with one unbatched forward, first token given BOS."""
    ctx = tokenizer(context, add_special_tokens=False)["input_ids"] if context else []
    body = tokenizer((" " + text) if context else text, add_special_tokens=False)["input_ids"]
    ids = torch.tensor([[tokenizer.bos_token_id, *ctx, *body]])
    with torch.no_grad():
        lp = torch.log_softmax(model(input_ids=ids).logits[0].float(), -1)
    start = 1 + len(ctx)
    return sum(lp[t - 1, ids[0, t]].item() for t in range(start, ids.shape[1]))


def test_sentence_scores_equal_the_unbatched_loop(tiny):
    family, model, tokenizer, info = tiny
    # a small token budget: several batches, mixed lengths, right padding inside batches
    scorer = make_scorer(model, tokenizer, info.lm_kind, batch_tokens=96, device="cpu")
    ours = scorer.score(SENTENCES)
    if info.lm_kind == "masked":
        ref = [reference_pll(model, tokenizer, s) for s in SENTENCES]
    else:
        ref = [reference_logprob(model, tokenizer, s) for s in SENTENCES]
    np.testing.assert_allclose(ours, ref, atol=TOL, rtol=0)
    assert scorer.stats["forward_passes"] > 1
    assert scorer.stats["padded_tokens"] > scorer.stats["real_tokens"]  # padding really happened


def test_one_big_batch_gives_the_same_scores(tiny):
    _, model, tokenizer, info = tiny
    small = make_scorer(model, tokenizer, info.lm_kind, batch_tokens=50, device="cpu").score(SENTENCES)
    big = make_scorer(model, tokenizer, info.lm_kind, batch_tokens=100_000, device="cpu").score(SENTENCES)
    np.testing.assert_allclose(small, big, atol=TOL, rtol=0)


def test_crows_shared_token_scores_equal_the_loop(tiny):
    _, model, tokenizer, info = tiny
    if info.lm_kind != "masked":
        pytest.skip("masked LMs only")
    scorer = MaskedLMScorer(model, tokenizer, batch_tokens=128, device="cpu")
    a, b = scorer.encode([SENTENCES[0], SENTENCES[1]])
    pa, pb = shared_token_positions(a["ids"], b["ids"], {i for i, s in enumerate(a["special"]) if s},
                                    {i for i, s in enumerate(b["special"]) if s})
    assert 0 < len(pa) < len(a["ids"]) - 2  # the differing word is left out
    lp = scorer.token_log_probs([a["ids"], b["ids"]], [MaskQuery(0, p) for p in pa] + [MaskQuery(1, p) for p in pb])
    assert lp[: len(pa)].sum() == pytest.approx(reference_pll(model, tokenizer, SENTENCES[0], pa), abs=TOL)
    assert lp[len(pa) :].sum() == pytest.approx(reference_pll(model, tokenizer, SENTENCES[1], pb), abs=TOL)


def test_queries_with_extra_masks_and_duplicates(tiny):
    _, model, tokenizer, info = tiny
    if info.lm_kind != "masked":
        pytest.skip("masked LMs only")
    scorer = MaskedLMScorer(model, tokenizer, batch_tokens=64, device="cpu")
    ids = scorer.encode([SENTENCES[3]])[0]["ids"]
    queries = [MaskQuery(0, 1, (2, 3)), MaskQuery(0, 2, (3,)), MaskQuery(1, 1, (2, 3))]  # seq 1 duplicates seq 0
    lp = scorer.token_log_probs([ids, list(ids)], queries)
    with torch.no_grad():
        for q, got in zip(queries, lp):
            x = torch.tensor([ids])
            x[0, [q.target, *q.also_masked]] = tokenizer.mask_token_id
            want = torch.log_softmax(model(input_ids=x).logits[0, q.target].float(), -1)[ids[q.target]].item()
            assert got == pytest.approx(want, abs=TOL)
    assert lp[0] == lp[2]
    assert scorer.stats["rows"] == 2  # the duplicate row was scored once


def test_full_head_fallback_gives_the_same_numbers(tiny):
    _, model, tokenizer, info = tiny
    if info.lm_kind != "masked":
        pytest.skip("masked LMs only")
    assert split_masked_lm(model) is not None  # every paper family has a split head
    split = MaskedLMScorer(model, tokenizer, device="cpu")
    full = MaskedLMScorer(model, tokenizer, device="cpu")
    full._check_split()
    full._encoder, full._head = None, None
    np.testing.assert_allclose(split.score(SENTENCES[:4]), full.score(SENTENCES[:4]), atol=TOL, rtol=0)


def test_causal_continuations_equal_the_loop(tiny):
    _, model, tokenizer, info = tiny
    if info.lm_kind != "causal":
        pytest.skip("causal LMs only")
    scorer = CausalLMScorer(model, tokenizer, batch_tokens=64, device="cpu")
    contexts = [SENTENCES[3], SENTENCES[2], SENTENCES[4]]
    conts = [SENTENCES[0], SENTENCES[4], SENTENCES[7]]
    got = [lp.sum() for lp in scorer.score_continuations(contexts, conts)]
    ref = [reference_logprob(model, tokenizer, c, context=x) for x, c in zip(contexts, conts)]
    np.testing.assert_allclose(got, ref, atol=TOL, rtol=0)


def test_pack_batches_respects_the_budget():
    lengths = np.array([3, 3, 4, 4, 4, 9, 30])
    batches = pack_batches(lengths, 12)
    assert batches == [(0, 3), (3, 5), (5, 6), (6, 7)]
    for start, stop in batches:
        assert (stop - start) * lengths[stop - 1] <= 12 or stop - start == 1
    assert pack_batches(np.array([], dtype=int), 10) == []


def test_bad_options_are_user_errors(tiny):
    _, model, tokenizer, info = tiny
    with pytest.raises(UserError, match="precision"):
        make_scorer(model, tokenizer, info.lm_kind, precision="fp8")
    with pytest.raises(UserError, match="batch-tokens"):
        make_scorer(model, tokenizer, info.lm_kind, batch_tokens=0)
