"""How a fine-tuning batch is laid out: flattened (padding-free), bucketed, or padded; per ``model_type``.

The batch *composition* (which examples, in which order) is the recipe's and never changes here: the
sampler (random, or length-grouped with ``group_by_length``) and the seed choose the examples of each
step; this module only chooses how those examples become tensors:

* ``padded``: each batch padded to its longest example (``DataCollatorWithPadding``);
* ``bucketed``: the same, rounded up to a multiple of :data:`PAD_MULTIPLE` (8), so that the tensor widths
  fall into few shape buckets (tensor-core-friendly widths on a GPU, few distinct shapes for kernels);
* ``flattened``: the examples concatenated into one row with ``position_ids`` restarting at 0 per example
  (``DataCollatorWithFlattening``), no padding at all.

Padding never changes the function computed: every model here masks padded positions out of attention and
pools a real token, so ``padded`` and ``bucketed`` give the same loss and gradients up to float rounding with
dropout off (tests/test_padding_free.py checks ≤ 1e-5 relative per family). In training, though, dropout draws
its masks per computed token, padding included, so another width is another dropout draw: the trajectories
are statistically alike but not equal (tiny BERT, RTE, 30 steps: training loss 3e-4 relative apart, against
2e-3 between seeds). So an explicit ``padding`` (``pad``, ``bucket``, ``flatten``) is part of the run id;
``auto`` is not, and what ``auto`` resolves to for a ``model_type`` is a result-changing choice: change it only
with a bump of :data:`harness.specs.FINETUNE_CODE_VERSION`.

Flattening is used only where transformers computes a sequence-classification model correctly on a
flattened batch. In transformers 5.x (checked in the installed source and by tests/test_padding_free.py)
that is no family this harness fine-tunes, so :data:`FLATTENING` holds, per ``model_type``, why not:
the encoders' bidirectional mask ignores packed ``position_ids`` (examples would attend to each other
outside flash-attention), DeBERTa builds its own relative-position attention from ``attention_mask``, and
every classification head pools one token per *row* (the first for encoders, the last non-pad token for
decoders), i.e. one prediction per flattened batch instead of one per example. ``padding: auto`` picks
``bucketed`` for those; ``padding: flatten`` is refused for them with that reason.

>>> choose_batching("bert", "auto")["mode"]
'bucketed'
>>> choose_batching("gpt2", "pad")
{'mode': 'padded', 'pad_to_multiple_of': None, 'requested': 'pad'}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ranking.errors import UserError

PADDING_OPTIONS = ("auto", "flatten", "bucket", "pad")
PAD_MULTIPLE = 8
_MODES = {"flatten": "flattened", "bucket": "bucketed", "pad": "padded"}

_ENCODER = ("the bidirectional attention mask (masking_utils.create_bidirectional_mask) ignores packed "
            "position_ids, so flattened examples would attend to each other, and the classifier pools token 0 "
            "of each row: one prediction per flattened batch")
_DEBERTA = ("its disentangled attention builds its mask and relative positions from attention_mask (no "
            "position_ids input), and the classifier pools token 0 of each row: one prediction per flattened batch")
_DECODER = ("the causal mask does honour packed position_ids (masking_utils.find_packed_sequence_indices), but "
            "the classification head pools the last non-pad token of each row: one prediction per flattened "
            "batch, not per example")

#: model_type -> why a flattened batch is not computed correctly for sequence classification (transformers 5.x).
#: A model_type absent here has no known flattening support either: ``auto`` gives it ``bucketed``.
#: Making ``auto`` flatten a model_type changes its results: bump harness.specs.FINETUNE_CODE_VERSION with it.
FLATTENING: dict[str, str] = {
    "bert": _ENCODER, "roberta": _ENCODER, "xlm-roberta": _ENCODER, "distilbert": _ENCODER,
    "albert": _ENCODER, "electra": _ENCODER,
    "deberta": _DEBERTA, "deberta-v2": _DEBERTA,
    "gpt2": _DECODER, "llama": _DECODER, "mistral": _DECODER, "qwen2": _DECODER,
}


def check_padding(padding: str) -> None:
    """The ``padding`` option's one validation point."""
    if padding not in PADDING_OPTIONS:
        raise UserError(f"padding {padding!r}: use one of {', '.join(PADDING_OPTIONS)}")


def choose_batching(model_type: str, padding: str = "auto") -> dict[str, Any]:
    """The batch layout for ``model_type`` under the ``padding`` option (what the record's ``batching`` says).

    >>> choose_batching("roberta", "bucket")
    {'mode': 'bucketed', 'pad_to_multiple_of': 8, 'requested': 'bucket'}
    >>> choose_batching("llama", "flatten")
    Traceback (most recent call last):
    ...
    ranking.errors.UserError: padding flatten is not supported for model_type llama in sequence classification: the causal mask does honour packed position_ids (masking_utils.find_packed_sequence_indices), but the classification head pools the last non-pad token of each row: one prediction per flattened batch, not per example; use padding: auto or bucket
    """
    check_padding(padding)
    if padding == "auto":
        mode = "bucketed"  # FLATTENING lists no model_type transformers flattens correctly for classification
    elif padding == "flatten":
        why = FLATTENING.get(model_type, "transformers has no known padding-free classification path for it")
        raise UserError(f"padding flatten is not supported for model_type {model_type} in sequence "
                        f"classification: {why}; use padding: auto or bucket")
    else:
        mode = _MODES[padding]
    return {"mode": mode, "pad_to_multiple_of": PAD_MULTIPLE if mode == "bucketed" else None,
            "requested": padding}


def make_collator(tokenizer: Any, batching: dict[str, Any]) -> Any:
    """The data collator for a :func:`choose_batching` result (padded or bucketed; right padding)."""
    from transformers import DataCollatorWithPadding

    if batching["mode"] not in ("padded", "bucketed"):
        raise ValueError(f"no collator for batching mode {batching['mode']!r}")
    return DataCollatorWithPadding(tokenizer, pad_to_multiple_of=batching["pad_to_multiple_of"])


# ---------------------------------------------------------------------- padding arithmetic (no torch)
def padded_width(lengths: Sequence[int], multiple: int | None = None) -> int:
    """The width a batch of these lengths is padded to (its longest, rounded up to ``multiple``).

    >>> padded_width([5, 9, 3]), padded_width([5, 9, 3], 8)
    (9, 16)
    """
    width = max(lengths)
    return -(-width // multiple) * multiple if multiple else width


def padding_share(batches: Sequence[Sequence[int]], multiple: int | None = None) -> float:
    """Share of computed tokens that are padding when each batch is padded to its :func:`padded_width`.

    >>> round(padding_share([[2, 4], [3, 3]]), 6)  # computed 2*4 + 2*3 = 14, real 12: 2/14
    0.142857
    """
    real = sum(sum(b) for b in batches)
    computed = sum(len(b) * padded_width(b, multiple) for b in batches)
    return 1 - real / computed


def packed_rows_share(lengths: Sequence[int], row_length: int) -> float:
    """Padding share when the examples, in order, are packed into rows of ``row_length`` tokens (a new row
    when the next example does not fit; the unfilled tail of each row is padding).

    >>> packed_rows_share([3, 3, 3], 8)  # rows [3, 3] and [3]: 16 computed, 9 real
    0.4375
    """
    rows, used = 0, row_length
    for n in lengths:
        if used + n > row_length:
            rows, used = rows + 1, 0
        used += n
    return 1 - sum(lengths) / (rows * row_length)


def best_fit_rows_share(lengths: Sequence[int], row_length: int) -> float:
    """Padding share when the examples are packed into rows of ``row_length`` tokens best-fit decreasing
    (longest first, each into the fullest row it still fits): near the least padding rows can have.

    >>> best_fit_rows_share([5, 3, 3, 5], 8)  # rows [5, 3] and [5, 3]: no padding
    0.0
    """
    free = [0] * (row_length + 1)  # free[c]: rows with c tokens of room left
    rows = 0
    for n in sorted(lengths, reverse=True):
        room = next((c for c in range(n, row_length + 1) if free[c]), None)
        if room is None:
            rows, room = rows + 1, row_length
        else:
            free[room] -= 1
        free[room - n] += 1
    return 1 - sum(lengths) / (rows * row_length)
