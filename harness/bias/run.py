"""One bias run: score a model zero-shot on one benchmark and store the result.

What each benchmark scores (all in :mod:`harness.bias.scoring`'s units, natural log):

* **CrowS-Pairs** — masked LMs: the Nangia et al. score, the sum of
  ``log p`` over the tokens the two sentences share (each masked in turn),
  shared tokens found by :func:`~harness.bias.align.shared_token_positions`;
  causal LMs: the sentence log-probability (first token given BOS).
* **StereoSet intrasentence** — each candidate is the item's context with
  BLANK replaced by the candidate's fill-in word(s) (read off the candidate
  sentence case-insensitively; the context keeps its casing, as the original
  evaluation inserts the word into the context). Masked LMs: the mean, over
  the fill-in tokens, of ``log p(token)`` with that token and the fill-in
  tokens after it masked (left to right: the first fill token is predicted
  with the whole fill masked, the last with the earlier ones revealed), so
  a multi-token word is neither penalised for its length nor given away by
  its own other pieces; causal LMs: the mean token log-probability of the
  whole sentence. Both are length-normalised like the original evaluator.
* **StereoSet intersentence** — causal LMs: the mean token log-probability
  of the candidate sentence given BOS + the context. Masked LMs: skipped —
  the original scores them with the next-sentence-prediction head, which is
  not part of the MLM, and a pseudo-log-likelihood of a sentence given
  another is not comparable across candidates of different lengths
  (recorded under ``skipped``).
* **WinoBias** — the sentence score (PLL for masked, log-probability for
  causal) of the pro- and the anti-stereotyped sentence of each pair.

The per-example scores go to ``runs/<run_id>.examples.parquet`` beside the
record; metrics are computed from exactly those columns by
:mod:`harness.bias.metrics`.
"""

from __future__ import annotations

import logging
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.bias.data import DATASETS, STEREOSET_LABELS
from harness.store import RunStore, atomic_write_parquet
from ranking.errors import UserError

log = logging.getLogger(__name__)

SCORING_METHOD = {
    "masked": {
        "crows_pairs": "sum of log p over the tokens shared by both sentences, each masked in turn (Nangia et al. 2020)",
        "stereoset_intrasentence": "mean log p of the fill-in tokens, masked left to right",
        "winobias": "pseudo-log-likelihood of the sentence (Salazar et al. 2020)",
    },
    "causal": {
        "crows_pairs": "sentence log-probability, first token given BOS",
        "stereoset_intrasentence": "mean token log-probability of the sentence, first token given BOS",
        "stereoset_intersentence": "mean token log-probability of the sentence given BOS + context",
        "winobias": "sentence log-probability, first token given BOS",
    },
}
INTERSENTENCE_MASKED_SKIP = (
    "masked LMs are not scored on StereoSet intersentence: the original evaluation needs the next-sentence-"
    "prediction head, which is not part of masked-LM scoring, and a pseudo-log-likelihood of one sentence "
    "given another is not comparable across candidates"
)


@dataclass
class Evaluation:
    frame: Any  # pandas DataFrame, one row per example
    metrics: dict[str, float]
    skipped: dict[str, str] = field(default_factory=dict)  # what was not scored, and why
    n_examples: int = 0
    notes: dict[str, str] = field(default_factory=dict)  # scored, but worth knowing (flagged pairs, ...)


# ---------------------------------------------------------------------- CrowS-Pairs
def evaluate_crows_pairs(scorer: Any, pairs: list) -> Evaluation:
    import numpy as np
    import pandas as pd

    from harness.bias.align import shared_token_positions
    from harness.bias.metrics import crows_pairs_metrics
    from harness.bias.scoring import MaskQuery

    more_texts = [p.sent_more for p in pairs]
    less_texts = [p.sent_less for p in pairs]
    if scorer.lm_kind == "masked":
        enc = scorer.encode(more_texts + less_texts)
        n = len(pairs)
        seqs = [e["ids"] for e in enc]
        queries: list = []
        owner: list[int] = []  # which of the 2n sentences a query belongs to
        n_shared = []
        for i in range(n):
            a, b = enc[i], enc[n + i]
            skip_a = {k for k, s in enumerate(a["special"]) if s}
            skip_b = {k for k, s in enumerate(b["special"]) if s}
            pa, pb = shared_token_positions(a["ids"], b["ids"], skip_a, skip_b)
            n_shared.append(len(pa))
            queries += [MaskQuery(i, p) for p in pa] + [MaskQuery(n + i, p) for p in pb]
            owner += [i] * len(pa) + [n + i] * len(pb)
        lp = scorer.token_log_probs(seqs, queries, desc="crows_pairs")
        sums = np.zeros(2 * n)
        np.add.at(sums, np.asarray(owner, dtype=np.int64), lp)
        score_more, score_less = sums[:n], sums[n:]
        n_more = n_less = n_shared
    else:
        scores = scorer.score(more_texts + less_texts)
        score_more, score_less = scores[: len(pairs)], scores[len(pairs) :]
        n_more = [len(x) for x in scorer.encode(more_texts)]
        n_less = [len(x) for x in scorer.encode(less_texts)]
    frame = pd.DataFrame({
        "index": [p.index for p in pairs],
        "bias_type": [p.bias_type for p in pairs],
        "direction": [p.direction for p in pairs],
        "sent_more": more_texts,
        "sent_less": less_texts,
        "score_more": np.asarray(score_more, dtype=float),
        "score_less": np.asarray(score_less, dtype=float),
        "n_tokens_more": np.asarray(n_more, dtype=np.int64),
        "n_tokens_less": np.asarray(n_less, dtype=np.int64),
    })
    return Evaluation(frame, crows_pairs_metrics(frame), {}, len(pairs))


# ---------------------------------------------------------------------- StereoSet
def fill_in(context: str, sentence: str) -> tuple[str, list[tuple[int, int]], bool]:
    """The context with each BLANK replaced by the candidate's word(s), and those words' character spans.

    The candidate sentence is matched against the context case-insensitively
    (the dataset lower-cases some candidates); the context keeps its casing.
    When the candidate does not fit the template, the sentence itself is
    returned with one span covering all of it, and ``False``.

    >>> fill_in("The Crimean people I met were BLANK", "The crimean people i met were boring")
    ('The Crimean people I met were boring', [(30, 36)], True)
    >>> fill_in("x is BLANK and BLANK.", "X is a and b.")
    ('x is a and b.', [(5, 6), (11, 12)], True)
    """
    parts = context.split("BLANK")
    if len(parts) > 1:
        pattern = "^" + "(.+?)".join(re.escape(p) for p in parts) + "$"
        m = re.match(pattern, sentence, flags=re.IGNORECASE | re.DOTALL)
        if m:
            text, spans = parts[0], []
            for k, word in enumerate(m.groups()):
                spans.append((len(text), len(text) + len(word)))
                text += word + parts[k + 1]
            return text, spans, True
    return sentence, [(0, len(sentence))], False


_SECTION_LABEL_COLS = {label: label.replace("-", "_") for label in STEREOSET_LABELS}


def _stereoset_intra_masked(scorer: Any, texts: list[str], spans: list[list[tuple[int, int]]]) -> list[float]:
    """Mean log p of the fill-in tokens, masked left to right (see the module docstring)."""
    import numpy as np

    from harness.bias.scoring import MaskQuery

    enc = scorer.encode(texts, offsets=True)
    queries, owner = [], []
    for i, (e, sp) in enumerate(zip(enc, spans)):
        fill = [k for k, ((s, t), special) in enumerate(zip(e["offsets"], e["special"]))
                if not special and t > s and any(s < b and t > a for a, b in sp)]
        if not fill:  # nothing matched (cannot happen on the public data): every token, as a PLL
            fill = [k for k, special in enumerate(e["special"]) if not special]
        for j, pos in enumerate(fill):
            queries.append(MaskQuery(i, pos, tuple(fill[j + 1 :])))
            owner.append(i)
    lp = scorer.token_log_probs([e["ids"] for e in enc], queries, desc="stereoset intrasentence")
    owner_arr = np.asarray(owner, dtype=np.int64)
    sums = np.bincount(owner_arr, weights=lp, minlength=len(texts))
    counts = np.bincount(owner_arr, minlength=len(texts))
    return list(sums / np.maximum(counts, 1))


def _mean(pieces: list) -> list[float]:
    return [float(p.mean()) if len(p) else 0.0 for p in pieces]


def evaluate_stereoset(scorer: Any, sections: dict[str, list]) -> Evaluation:
    import pandas as pd

    from harness.bias.metrics import stereoset_metrics

    frames, metrics, skipped, notes = [], {}, {}, {}
    for section, items in sections.items():
        if section == "intersentence" and scorer.lm_kind == "masked":
            skipped["intersentence"] = INTERSENTENCE_MASKED_SKIP
            continue
        rows = [(it, label) for it in items for label in STEREOSET_LABELS]
        if section == "intrasentence":
            filled = [fill_in(it.context, it.sentences[label]) for it, label in rows]
            texts = [f[0] for f in filled]
            if scorer.lm_kind == "masked":
                scores = _stereoset_intra_masked(scorer, texts, [f[1] for f in filled])
            else:
                seqs = [[scorer.bos_id, *ids] for ids in scorer.encode(texts)]
                scores = _mean(scorer.token_log_probs(seqs, [1] * len(seqs), desc="stereoset intrasentence"))
            not_fitting = sum(not f[2] for f in filled)
            if not_fitting:
                notes["intrasentence_template"] = (f"{not_fitting} candidate(s) do not fit their context's "
                                                     "template; scored as whole sentences")
        else:
            texts = [it.sentences[label] for it, label in rows]
            scores = _mean(scorer.score_continuations([it.context for it, _ in rows], texts))
        by_item: dict[str, dict[str, Any]] = {}
        for (it, label), text, score in zip(rows, texts, scores):
            rec = by_item.setdefault(it.id, {"section": section, "id": it.id, "target": it.target,
                                             "bias_type": it.bias_type, "context": it.context})
            col = _SECTION_LABEL_COLS[label]
            rec[f"sentence_{col}"] = text
            rec[f"score_{col}"] = float(score)
        frame = pd.DataFrame(list(by_item.values()))
        frames.append(frame)
        metrics.update(stereoset_metrics(frame, section))
    if len(frames) == 2:  # as the original evaluator: all items of both sections pooled
        metrics.update(stereoset_metrics(pd.concat(frames, ignore_index=True), "overall"))
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return Evaluation(frame, metrics, skipped, len(frame), notes)


# ---------------------------------------------------------------------- WinoBias
def evaluate_winobias(scorer: Any, pairs: list) -> Evaluation:
    import numpy as np
    import pandas as pd

    from harness.bias.metrics import winobias_metrics

    scores = scorer.score([p.pro for p in pairs] + [p.anti for p in pairs])
    n = len(pairs)
    frame = pd.DataFrame({
        "type": [p.type for p in pairs],
        "split": [p.split for p in pairs],
        "line": [p.line for p in pairs],
        "pro": [p.pro for p in pairs],
        "anti": [p.anti for p in pairs],
        "pronoun_only": [p.pronoun_only for p in pairs],
        "score_pro": np.asarray(scores[:n], dtype=float),
        "score_anti": np.asarray(scores[n:], dtype=float),
    })
    flagged = int((~frame["pronoun_only"]).sum())
    notes = {}
    if flagged:
        notes["flagged_pairs"] = (f"{flagged} pair(s) differ in more than the gendered pronouns: "
                                    "scored, but counted separately (*_flagged) and left out of the headline metrics")
    return Evaluation(frame, winobias_metrics(frame), {}, n, notes)


# ---------------------------------------------------------------------- the run
def load_examples(dataset: str, data_root: Path | None, limit: int | None) -> Any:
    from harness.bias import data

    if dataset == "crows_pairs":
        return data.load_crows_pairs(data_root, limit)
    if dataset == "stereoset":
        return data.load_stereoset(data_root, limit)
    if dataset == "winobias":
        return data.load_winobias(data_root, limit)
    raise UserError(f"unknown bias dataset {dataset!r}: use one of {', '.join(DATASETS)}")


def evaluate(scorer: Any, dataset: str, examples: Any) -> Evaluation:
    """Score ``examples`` of ``dataset`` with ``scorer``: per-example frame and metrics."""
    if dataset == "crows_pairs":
        return evaluate_crows_pairs(scorer, examples)
    if dataset == "stereoset":
        return evaluate_stereoset(scorer, examples)
    if dataset == "winobias":
        return evaluate_winobias(scorer, examples)
    raise UserError(f"unknown bias dataset {dataset!r}: use one of {', '.join(DATASETS)}")


def validate_spec(spec: Any) -> None:
    from harness.bias.scoring import PRECISIONS
    from harness.models import check_head, resolve_model, scoring_head

    if spec.dataset not in DATASETS:
        raise UserError(f"unknown bias dataset {spec.dataset!r}: use one of {', '.join(DATASETS)}")
    if spec.limit is not None and (isinstance(spec.limit, bool) or not isinstance(spec.limit, int) or spec.limit < 1):
        raise UserError(f"limit must be a positive integer, not {spec.limit!r}")
    if spec.precision not in PRECISIONS:
        raise UserError(f"unknown precision {spec.precision!r}: use one of {', '.join(PRECISIONS)}")
    info = resolve_model(spec.model, spec.model_args)
    check_head(info, scoring_head(info))  # no LM head / no trained MLM head / encoder-decoder: refused now


def _finite(metrics: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(float(v))}


def run_bias(
    spec: Any,
    output: Path,
    *,
    data_root: Path | None = None,
    batch_tokens: int | None = None,
    progress: bool = True,
) -> dict:
    """Score ``spec.model`` on ``spec.dataset`` and store the record (skipped if already done).

    Writes ``runs/<run_id>.examples.parquet`` first, then ``runs/<run_id>.json``
    (status ``ok``); on an error writes a ``failed`` record and re-raises.
    ``data_root`` None means ``$VNR_DATA_ROOT``, else the public sources.
    """
    from harness.environment import environment_info
    from harness.models import ModelError
    from ranking.paths import resolve_data_root

    store = RunStore(output)
    rid = spec.run_id()
    if store.is_done(rid):
        return store.get(rid)  # type: ignore[return-value]
    validate_spec(spec)
    if batch_tokens is not None and (isinstance(batch_tokens, bool) or int(batch_tokens) < 1):
        raise UserError(f"--batch-tokens must be a positive integer, not {batch_tokens!r}")
    root = resolve_data_root(data_root)
    store.ensure_writable()
    base = {"run_id": rid, "kind": "bias", "model": spec.model, "dataset": spec.dataset, "limit": spec.limit,
            "precision": spec.precision, "identity": spec.identity()}
    if spec.model_args:
        base["model_args"] = dict(spec.model_args)
    start = time.perf_counter()
    store.mark_running(rid)
    try:
        from harness.bias.data import tokenizer_texts
        from harness.bias.scoring import make_scorer
        from harness.models import load_model, resolve_model, scoring_head

        info = resolve_model(spec.model, spec.model_args)
        examples = load_examples(spec.dataset, root, spec.limit)
        texts = tokenizer_texts(spec.dataset, root) if info.is_tiny else None
        model, tokenizer, info = load_model(spec.model, scoring_head(info), texts=texts, seed=0,
                                            model_args=spec.model_args)
        scorer = make_scorer(model, tokenizer, info.lm_kind, precision=spec.precision,
                             batch_tokens=batch_tokens, progress=progress)
        score_start = time.perf_counter()
        result = evaluate(scorer, spec.dataset, examples)
        score_time = time.perf_counter() - score_start
        atomic_write_parquet(store.artifact_path(rid, "examples.parquet"), result.frame)
        record = {
            **base,
            "metrics": _finite(result.metrics),
            "skipped": result.skipped,
            "notes": result.notes,
            "scoring": {
                "lm_kind": info.lm_kind,
                "method": SCORING_METHOD[info.lm_kind],
                "device": str(scorer.device),
                "dtype": str(scorer.dtype).replace("torch.", ""),
                "precision": spec.precision,
                "tf32": scorer.tf32,
                "batch_tokens": scorer.batch_tokens,
                "scoring_time_s": score_time,
                "tokens_per_s": scorer.stats["real_tokens"] / score_time if score_time > 0 else None,
                **scorer.stats,
            },
            "examples_file": store.artifact_path(rid, "examples.parquet").name,
            "environment": environment_info(),
            "status": "ok",
            "error": None,
            "wall_time_s": time.perf_counter() - start,
            "n_examples": result.n_examples,
        }
        store.write(record)
        return record
    except ModelError:
        raise  # the model never loaded: the run never started, nothing is recorded
    except Exception as exc:
        store.write({**base, "metrics": {}, "skipped": {}, "environment": environment_info(), "status": "failed",
                     "error": f"{type(exc).__name__}: {exc}", "wall_time_s": time.perf_counter() - start,
                     "n_examples": 0})
        raise
    finally:
        store.clear_running(rid)
