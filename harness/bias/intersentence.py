"""StereoSet intersentence: which of three candidate sentences follows a context, for every model.

Each item has a context sentence and three candidates (stereotype,
anti-stereotype, unrelated); a model's score for a candidate says how well it
follows the context. Two methods:

* **likelihood** (every LM): the mean log-probability of the candidate's
  tokens given the context. Causal LMs: ``log p(token | BOS + context +
  earlier candidate tokens)``. Masked LMs: ``context candidate`` as one
  sequence with the tokenizer's special tokens; each candidate token is masked
  in turn (the context never is) together with the later pieces of its own
  word, so a multi-token word is neither penalised for its length nor given
  away by its own other pieces (PLL-word-l2r, Kauf & Ivanova 2023; the
  intrasentence fill-in is masked the same way), and the log-probabilities
  are averaged over the candidate's tokens. Length-normalised like the
  intrasentence score and the causal score.
* **next sentence** (checkpoints with a trained next-sentence-prediction head:
  BERT): ``P(is next)`` of ``[CLS] context [SEP] candidate [SEP]`` (token types
  0, then 1), the published evaluation's score for BERT (Nadeem et al.,
  ``BertForNextSentencePrediction``, softmax index 0). The frame and the
  metrics keep its log, which orders the candidates as the probability does
  without float32's rounding of confident pairs to exactly 1.0 (a tie there).

Which method the section's headline ``intersentence_*`` (and so the
``stereoset_inter_icat`` criterion) comes from:

============  ===============================  =========================================
mode          masked LM with a trained NSP     masked LM without / causal LM
              head
============  ===============================  =========================================
default       likelihood (one method for        likelihood
              every model: like with like)
reference     next sentence (as published)      likelihood, noted: the published RoBERTa,
                                                XLNet and GPT-2 numbers used a separately
                                                trained head (StereoSet's ``ModelNSP``),
                                                which no hub checkpoint contains
============  ===============================  =========================================

Where a model has both, both are kept (frame columns ``likelihood_<label>``,
``nsp_<label>``; metrics ``intersentence_likelihood_{lms,ss,icat}``,
``intersentence_nsp_{lms,ss,icat}``) with ``intersentence_method_agreement``,
the % of LMS/SS pairwise decisions both methods make the same way
(:func:`harness.bias.metrics.stereoset_decision_agreement`). The record's
``notes["intersentence_method"]`` says which method the headline used.

The next-sentence scorer comes with the masked scorer (its ``next_sentence``
attribute), set by :func:`harness.bias.run.run_bias` only for a dataset whose
record asks for it (StereoSet) and a checkpoint that has a trained head
(:func:`harness.models.load_next_sentence_model`). Nothing here imports torch
at import time.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from harness.bias.results import SectionScores
from harness.bias.scoring import LMScorer, MaskQuery, pack_batches

log = logging.getLogger(__name__)

SECTION = "intersentence"
LIKELIHOOD = "likelihood"
NEXT_SENTENCE = "nsp"
METHOD_TEXT = {
    LIKELIHOOD: "the likelihood method (mean log p of the candidate's tokens given the context)",
    NEXT_SENTENCE: "the next-sentence head's P(is next) of [CLS] context [SEP] candidate [SEP], as published",
}
PUBLISHED_SEPARATE_HEAD = (
    "the published number for this kind of model (RoBERTa, XLNet, GPT-2) came from a next-sentence head trained "
    "separately by the StereoSet authors (ModelNSP), which is not part of the checkpoint, so it cannot be "
    "reproduced from the model's own weights"
)


# ---------------------------------------------------------------------- next-sentence head
class NextSentenceScorer(LMScorer):
    """``log P(is next)`` of (context, candidate) pairs from a next-sentence-prediction model, batched.

    Pairs are encoded by the tokenizer as pairs (BERT: ``[CLS] A [SEP] B [SEP]``,
    token types 0 then 1), sorted by length and packed into batches of at most
    ``batch_tokens`` padded tokens (right padding, attention mask, padding's
    token type 0); the model runs in the scorer's precision (fp32 exact by
    default, as :class:`~harness.bias.scoring.LMScorer`) and the two logits are
    log-softmaxed in float64. Identical pairs are scored once.
    """

    lm_kind = "next_sentence"

    def __init__(self, model: Any, tokenizer: Any, **kwargs: Any):
        super().__init__(model, tokenizer, **kwargs)
        self.pad_id = int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0)

    def encode_pairs(self, contexts: Sequence[str], candidates: Sequence[str]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """(token ids, token types) of each pair, with the tokenizer's special tokens."""
        enc = self.tokenizer(list(contexts), list(candidates), add_special_tokens=True, return_token_type_ids=True,
                             truncation=False)
        return [(tuple(ids), tuple(types)) for ids, types in zip(enc["input_ids"], enc["token_type_ids"])]

    def log_p_next(self, contexts: Sequence[str], candidates: Sequence[str]) -> np.ndarray:
        """``log P(candidate follows context)`` per pair (float64): log-softmax of the head's logits, index 0."""
        torch = self._torch
        pairs = self.encode_pairs(contexts, candidates)
        index: dict[tuple, int] = {}
        uniq: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
        back = np.empty(len(pairs), dtype=np.int64)
        for i, pair in enumerate(pairs):
            if pair not in index:
                self._check_length(pair[0])
                index[pair] = len(uniq)
                uniq.append(pair)
            back[i] = index[pair]
        lengths = np.array([len(ids) for ids, _ in uniq], dtype=np.int64)
        order = np.argsort(lengths, kind="stable")
        out = np.empty(len(uniq))
        with torch.inference_mode(), self.exact_matmuls(), self._progress_bar(len(uniq), "next sentence") as bar:
            for start, stop in pack_batches(lengths[order], self.batch_tokens) if len(uniq) else []:
                rows = order[start:stop]
                width = int(lengths[rows].max())
                ids = np.full((len(rows), width), self.pad_id, dtype=np.int64)
                types = np.zeros((len(rows), width), dtype=np.int64)
                att = np.zeros((len(rows), width), dtype=np.int64)
                for r, u in enumerate(rows):
                    seq, tt = uniq[u]
                    ids[r, : len(seq)], types[r, : len(seq)], att[r, : len(seq)] = seq, tt, 1
                logits = self.model(input_ids=torch.from_numpy(ids).to(self.device),
                                    attention_mask=torch.from_numpy(att).to(self.device),
                                    token_type_ids=torch.from_numpy(types).to(self.device)).logits
                out[rows] = torch.log_softmax(logits.double(), dim=-1)[:, 0].cpu().numpy()
                self._count_pass(len(rows), width, int(lengths[rows].sum()))
                bar.update(len(rows))
        return out[back]


# ---------------------------------------------------------------------- likelihood, masked LMs
def _joined(context: str, candidate: str) -> tuple[str, int]:
    """``context candidate`` (one space between) and where the candidate starts."""
    context = context.strip()
    return f"{context} {candidate.strip()}", len(context) + 1


def _word_ids(tokenizer: Any, texts: list[str], encoded: list[dict]) -> list[list[int | None]] | None:
    """The tokenizer's word index of every token (None: a special token); None for a tokenizer that has none."""
    if not getattr(tokenizer, "is_fast", False):
        return None
    enc = tokenizer(texts, add_special_tokens=True, truncation=False)
    words = [enc.word_ids(i) for i in range(len(texts))]
    if any(len(w) != len(e["ids"]) for w, e in zip(words, encoded)):
        return None
    return words


def masked_candidate_log_likelihood(scorer: Any, contexts: Sequence[str], candidates: Sequence[str]
                                    ) -> tuple[np.ndarray, np.ndarray, bool]:
    """(mean log p of each candidate's tokens given its context, how many tokens, whole words masked).

    ``context candidate`` is one sequence; each candidate token is masked with
    the later tokens of its word (``MaskQuery.also_masked``), never the
    context. ``whole words masked`` is False for a tokenizer without word ids
    (then every token is masked alone: plain PLL).
    """
    joined = [_joined(c, x) for c, x in zip(contexts, candidates)]
    texts = [t for t, _ in joined]
    encoded = scorer.encode(texts, offsets=True)
    words = _word_ids(scorer.tokenizer, texts, encoded)
    queries: list[MaskQuery] = []
    for i, (e, (_, start)) in enumerate(zip(encoded, joined)):
        # a candidate token ends after the space that ends the context (byte-level BPE offsets may include it)
        cand = [k for k, ((_, t), special) in enumerate(zip(e["offsets"], e["special"])) if not special and t >= start]
        for j, pos in enumerate(cand):
            word = words[i][pos] if words is not None else None
            later = tuple(p for p in cand[j + 1:] if word is not None and words[i][p] == word)  # type: ignore[index]
            queries.append(MaskQuery(i, pos, later))
    lp = scorer.token_log_probs([e["ids"] for e in encoded], queries, desc="stereoset intersentence")
    owner = np.array([q.seq for q in queries], dtype=np.int64)
    sums = np.bincount(owner, weights=lp, minlength=len(texts))
    counts = np.bincount(owner, minlength=len(texts))
    return sums / np.maximum(counts, 1), counts, words is not None


# ---------------------------------------------------------------------- the section
def _section_metrics(rows: list, values: Sequence[float], name: str) -> dict[str, float]:
    """``intersentence_<name>_{lms,ss,icat}`` of one per-candidate score list."""
    from harness.bias.metrics import stereoset_metrics

    m = stereoset_metrics(_item_frame(rows, values), f"{SECTION}_{name}")
    return {f"{SECTION}_{name}_{k}": m[f"{SECTION}_{name}_{k}"] for k in ("lms", "ss", "icat")}


def _item_frame(rows: list, values: Sequence[float]) -> Any:
    """One row per item (target, bias_type, score_<label>) from per-candidate rows (item, gold label)."""
    import pandas as pd

    by_item: dict[str, dict[str, Any]] = {}
    for (it, label), value in zip(rows, values):
        rec = by_item.setdefault(it.id, {"target": it.target, "bias_type": it.bias_type})
        rec[f"score_{label.replace('-', '_')}"] = float(value)
    return pd.DataFrame(list(by_item.values()))


def intersentence_scores(scorer: Any, rows: list, scoring: str = "default") -> SectionScores:
    """The intersentence section scored (:class:`~harness.bias.results.SectionScores`): ``rows`` are
    (item, gold label) pairs; the headline score per candidate by the table in the module docstring."""
    from harness.bias.metrics import stereoset_decision_agreement

    contexts = [it.context for it, _ in rows]
    texts = [it.sentences[label] for it, label in rows]
    if scorer.lm_kind != "masked":
        scores = [float(p.mean()) if len(p) else 0.0 for p in scorer.score_continuations(contexts, texts)]
        notes = {}
        if scoring == "reference":
            notes[f"{SECTION}_method"] = (f"headline {SECTION}_* from the likelihood method, as by default: "
                                          f"{PUBLISHED_SEPARATE_HEAD}")
        return SectionScores(texts, scores, notes=notes)

    likelihood, n_tokens, whole_words = masked_candidate_log_likelihood(scorer, contexts, texts)
    columns: dict[str, list] = {LIKELIHOOD: likelihood.tolist(), "n_tokens": n_tokens.tolist()}
    metrics = _section_metrics(rows, likelihood, LIKELIHOOD)
    notes: dict[str, str] = {}
    if not whole_words:
        notes[f"{SECTION}_words"] = "the tokenizer gives no word ids: every candidate token was masked alone"
    nsp_scorer = getattr(scorer, "next_sentence", None)
    if nsp_scorer is None:
        headline, used = likelihood, LIKELIHOOD
        why = (f"{PUBLISHED_SEPARATE_HEAD}" if scoring == "reference"
               else "the model has no trained next-sentence head to compare with")
        notes[f"{SECTION}_method"] = f"headline {SECTION}_* from {METHOD_TEXT[LIKELIHOOD]}; {why}"
    else:
        nsp = nsp_scorer.log_p_next(contexts, texts)
        columns[NEXT_SENTENCE] = nsp.tolist()
        metrics.update(_section_metrics(rows, nsp, NEXT_SENTENCE))
        agree = stereoset_decision_agreement(_item_frame(rows, likelihood), _item_frame(rows, nsp))
        metrics.update({f"{SECTION}_method_{k}": v for k, v in agree.items()})
        used = NEXT_SENTENCE if scoring == "reference" else LIKELIHOOD
        headline = nsp if used == NEXT_SENTENCE else likelihood
        other = LIKELIHOOD if used == NEXT_SENTENCE else NEXT_SENTENCE
        notes[f"{SECTION}_method"] = (
            f"headline {SECTION}_* from {METHOD_TEXT[used]}; beside it {METHOD_TEXT[other]}: {SECTION}_{other}_*, "
            f"agreement of the two in {SECTION}_method_agreement"
            + (" (the default headline is the likelihood method, the same for every masked LM)"
               if used == LIKELIHOOD else ""))
    return SectionScores(texts, [float(s) for s in headline], columns=columns, notes=notes, metrics=metrics)
