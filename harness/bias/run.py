"""One bias run: score a model zero-shot on one benchmark and store the result.

How each benchmark is loaded, scored and turned into metrics is its dataset
record's business (:data:`harness.bias.data.REGISTRY`: loader, evaluator in
:mod:`harness.bias.evaluators`, scoring method, metrics); this module looks the
record up and runs it. The per-example scores go to
``runs/<run_id>.examples.parquet`` beside the record; metrics are computed from
exactly those columns by :mod:`harness.bias.metrics`.
"""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from harness.bias.data import get_dataset
from harness.bias.evaluators import (
    Evaluation,
    evaluate_crows_pairs,
    evaluate_stereoset,
    evaluate_winobias,
    fill_in,
)
from harness.store import RunStore, atomic_write_parquet
from ranking.floor.errors import UserError

__all__ = ["Evaluation", "evaluate", "evaluate_crows_pairs", "evaluate_stereoset", "evaluate_winobias", "fill_in",
           "load_examples", "run_bias", "validate_spec"]

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------- the run
def load_examples(dataset: str, data_root: Path | None, limit: int | None) -> Any:
    """The examples of ``dataset`` (its record's loader), the first ``limit`` of them."""
    return get_dataset(dataset).load(data_root, limit)


def evaluate(scorer: Any, dataset: str, examples: Any, scoring: str = "default") -> Evaluation:
    """Score ``examples`` of ``dataset`` with ``scorer`` (its record's evaluator) under ``scoring``
    (``default`` | ``reference`` | ``votenrank``): per-example frame and metrics."""
    return get_dataset(dataset).evaluate(scorer, examples, scoring)


def validate_spec(spec: Any) -> None:
    """What the spec's declared fields cannot say (its values were checked when it was made): the model has
    the head the dataset's scorer needs."""
    from harness.models import check_head, check_local_files, resolve_model, scoring_head

    info = resolve_model(spec.model, spec.model_args)
    check_local_files(info)  # no weights / truncated weights / no tokenizer files: refused now
    check_head(info, scoring_head(info))  # no LM head / no trained MLM head / encoder-decoder: refused now


def _finite(metrics: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in metrics.items() if v is not None and math.isfinite(float(v))}


def _uses_next_sentence(spec: Any, info: Any) -> bool:
    """A masked LM on a dataset whose evaluator also scores with the next-sentence head (StereoSet), of a
    family that has one (BERT): only then is the next-sentence model loaded (never for ``scoring: votenrank``,
    whose StereoSet scores are sentence losses alone)."""
    from harness.models import has_next_sentence_class

    if spec.scoring == "votenrank":
        return False
    return info.lm_kind == "masked" and get_dataset(spec.dataset).next_sentence and has_next_sentence_class(info)


def _attach_next_sentence(scorer: Any, spec: Any, info: Any, model: Any, tokenizer: Any, batch_tokens: int | None,
                          progress: bool) -> dict[str, str]:
    """Give ``scorer`` the checkpoint's next-sentence scorer where the run uses one; the notes to record."""
    if not _uses_next_sentence(spec, info):
        return {}
    from harness.bias.intersentence import NextSentenceScorer
    from harness.models import load_next_sentence_model

    nsp_model, why = load_next_sentence_model(info.name, tokenizer=tokenizer, seed=0, encoder=model.base_model,
                                              model_args=spec.model_args)
    if nsp_model is None:
        log.warning("%s", why)
        return {"intersentence_next_sentence": why}
    scorer.next_sentence = NextSentenceScorer(nsp_model, tokenizer, precision=spec.precision,
                                              batch_tokens=batch_tokens, progress=progress)
    return {}


def _next_sentence_stats(scorer: Any, spec: Any, info: Any) -> dict[str, Any]:
    """The record's ``scoring.next_sentence``: the head (trained | untrained: not used | random: a tiny
    model's) and, where it was used, its scorer's counters."""
    if not _uses_next_sentence(spec, info):
        return {}
    nsp = getattr(scorer, "next_sentence", None)
    if nsp is None:
        return {"next_sentence": {"head": "untrained"}}
    return {"next_sentence": {"head": "random" if info.is_tiny else "trained", **nsp.stats}}


def run_bias(
    spec: Any,
    output: Path,
    *,
    data_root: Path | None = None,
    batch_tokens: int | None = None,
    progress: bool = True,
) -> dict:
    """Score ``spec.model`` on ``spec.dataset`` and store the record (returned as stored if already done).

    Through the store's run lifecycle (:meth:`harness.store.RunStore.run`): writes
    ``runs/<run_id>.examples.parquet`` first, then ``runs/<run_id>.json`` (status
    ``ok``); on an error the lifecycle stores a ``failed`` record and it re-raises.
    ``data_root`` None means ``$VNR_DATA_ROOT``, else the public sources.
    """
    from ranking.floor.paths import resolve_data_root

    store = RunStore(output)
    rid = spec.run_id()
    stored = store.done_record(spec)
    if stored is not None:
        return stored
    validate_spec(spec)
    if batch_tokens is not None and (isinstance(batch_tokens, bool) or int(batch_tokens) < 1):
        raise UserError(f"--batch-tokens must be a positive integer, not {batch_tokens!r}")
    root = resolve_data_root(data_root)
    store.ensure_writable()
    with store.run(spec, busy_is_error=True) as run:
        if run.state == "done":
            return run.record  # type: ignore[return-value]
        base = {"limit": spec.limit, "precision": spec.precision, "metrics": {}, "skipped": {}, "n_examples": 0}
        if spec.model_args:
            base["model_args"] = dict(spec.model_args)
        try:
            from harness.bias.data import tokenizer_texts
            from harness.bias.scoring import loading_kwargs, make_scorer
            from harness.models import load_model, resolve_model, scoring_head

            info = resolve_model(spec.model, spec.model_args)
            log.info("scoring %s on %s: loading torch, the data and the model …", spec.model, spec.dataset)
            examples = load_examples(spec.dataset, root, spec.limit)
            texts = tokenizer_texts(spec.dataset, root) if info.is_tiny else None
            model, tokenizer, info = load_model(spec.model, scoring_head(info), texts=texts, seed=0,
                                                model_args=spec.model_args,
                                                **loading_kwargs(spec.precision, spec.model_args))
            scorer = make_scorer(model, tokenizer, info.lm_kind, precision=spec.precision,
                                 batch_tokens=batch_tokens, progress=progress)
            head_notes = _attach_next_sentence(scorer, spec, info, model, tokenizer, batch_tokens, progress)
            score_start = time.perf_counter()
            result = evaluate(scorer, spec.dataset, examples, spec.scoring)
            score_time = time.perf_counter() - score_start
            atomic_write_parquet(store.artifact_path(rid, "examples.parquet"), result.frame)
        except Exception as exc:
            run.fail(exc, base)
            raise
        return run.finish({
            **base,
            "metrics": _finite(result.metrics),
            "skipped": result.skipped,
            "notes": {**head_notes, **result.notes},
            "scoring": {
                "lm_kind": info.lm_kind,
                "mode": spec.scoring,
                "method": get_dataset(spec.dataset).scoring_method(info.lm_kind, spec.scoring),
                "device": str(scorer.device),
                "dtype": str(scorer.dtype).replace("torch.", ""),
                "precision": spec.precision,
                "tf32": scorer.tf32,
                "batch_tokens": scorer.batch_tokens,
                "scoring_time_s": score_time,
                "tokens_per_s": scorer.stats["real_tokens"] / score_time if score_time > 0 else None,
                **scorer.stats,
                **_next_sentence_stats(scorer, spec, info),
            },
            "examples_file": store.artifact_path(rid, "examples.parquet").name,
            "n_examples": result.n_examples,
        })
