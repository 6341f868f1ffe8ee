"""How a fine-tuning batch is laid out: flattened (padding-free), bucketed, or padded; per ``model_type``.

The batch *composition* (which examples, in which order) is the recipe's and never changes here: the
sampler (random, or length-grouped with ``group_by_length``) and the seed choose the examples of each
step; this module only chooses how those examples become tensors:

* ``padded``: each batch padded to its longest example (``DataCollatorWithPadding``);
* ``bucketed``: the same, rounded up to a multiple of :data:`PAD_MULTIPLE` (8), so that the tensor widths
  fall into few shape buckets (tensor-core-friendly widths on a GPU, few distinct shapes for kernels);
* ``flattened``: the examples packed into rows as wide as the longest, several per row, ``position_ids``
  restarting at 0 per example (:class:`FlatCollator`); only the rows' tails are padding (the families below).

Padding never changes the function computed: every model here masks padded positions out of attention and
pools a real token, so ``padded`` and ``bucketed`` give the same loss and gradients up to float rounding with
dropout off (tests/test_padding_free.py checks ≤ 1e-5 relative per family). In training, though, dropout draws
its masks per computed token, padding included, so another width is another dropout draw: the trajectories
are statistically alike but not equal (tiny BERT, RTE, 30 steps: training loss 3e-4 relative apart, against
2e-3 between seeds). So an explicit ``padding`` (``pad``, ``bucket``, ``flatten``) is part of the run id;
``auto`` is not (below).

Flattening is offered only where the flattened row is computed as separate examples, tested per family
(tests/test_padding_free.py: loss, every gradient and the predictions equal the padded batch's): the decoders
(:data:`FLAT_DECODERS`: GPT-2, Llama, Mistral, Qwen2), whose body already keeps packed examples apart along
``position_ids``, and the BERT-family encoders (:data:`FLAT_ENCODERS`: BERT, RoBERTa and DistilRoBERTa,
ALBERT, DistilBERT, ELECTRA), given each example's attention in the form their attention backend takes; both
pool each example's own token with the model's own head and loss (:mod:`harness.finetune.flat`).
:data:`FLATTENING` holds, per ``model_type``, why the others cannot be flattened (DeBERTa builds its
relative positions and mask from ``attention_mask``: it keeps bucketed padding); ``padding: flatten`` is
refused for those with that reason.

``padding: auto`` takes the layout the grid's calibration measured fastest on its device among those exact for
the family (:func:`harness.grid.calibrate.candidate_layouts`: bucketed and, where the family flattens,
flattened); without such a measurement (a single ``vnr finetune``, an entry calibrated before layouts were
measured, a family the measured layout is not exact for) it is ``bucketed``. The record's ``settings.batching``
says which, with ``chosen_by: calibration`` where the calibration chose. The run-id rule, as for ``precision:
auto``: ``auto`` stays out of the run id, so a stored run is done whatever layout it ran with (re-running a
grid never redoes it unasked) and its record keeps naming that layout (nothing stored is reinterpreted); an
explicit layout is another run id. A flattened batch computes fewer tokens (its rows are no wider than the
padded batch and fewer), but outside a varlen kernel (sdpa, eager) each row's block-diagonal mask is dense,
and a GPU's speed at these sizes is set by more than FLOPs: hence measured, not assumed. Measured on a CPU
(``scripts/bench_finetune.py --family gpt2``: one thread, a small GPT-2, batch 16, 100 steps x 3 interleaved
rounds): 2.27x bucketed's samples/s on SST-2 (10.5 % padding against 67 %), 1.09x on RTE (14 % against 30 %);
one single row per batch instead was 0.64x on RTE. The encoders, the same way (``--family bert`` / ``roberta``,
small shapes: 2 layers, hidden 128, sdpa): BERT 1.93x on SST-2 (10.3 % against 68.5 %), 1.01x on RTE (12.6 %
against 22.9 %); RoBERTa 2.01x on SST-2 (9.8 % against 64.4 %), 1.25x on RTE (14.7 % against 28.0 %); the
same training loss in every layout.
Changing the rule ``auto`` follows without a measurement changes results (dropout draws per computed token):
bump :data:`harness.specs.FINETUNE_CODE_VERSION` with it.

>>> choose_batching("bert", "auto")["mode"]
'bucketed'
>>> choose_batching("gpt2", "pad")
{'mode': 'padded', 'pad_to_multiple_of': None, 'requested': 'pad'}
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ranking.floor.errors import UserError

PADDING_OPTIONS = ("auto", "flatten", "bucket", "pad")
PAD_MULTIPLE = 8
_MODES = {"flatten": "flattened", "bucket": "bucketed", "pad": "padded"}

_DEBERTA = ("its disentangled attention builds its mask and relative positions from attention_mask (no "
            "prepared-mask or position_ids path): DeBERTa keeps bucketed padding")

#: Decoder model_types whose flattened rows harness.finetune.flat scores per example (the body honours packed
#: position_ids; the flat forward pools each example's last token with the model's own score head).
FLAT_DECODERS = frozenset({"gpt2", "llama", "mistral", "qwen2"})

#: Encoder model_types harness.finetune.flat flattens -> the body's layer stack (the module whose output is the
#: rows' last hidden state, where each example's first token is taken for the model's own pooler and head).
FLAT_ENCODERS: dict[str, str] = {"bert": "encoder", "roberta": "encoder", "albert": "encoder",
                                 "electra": "encoder", "distilbert": "transformer"}

#: model_type -> why a flattened batch is not computed correctly for sequence classification (transformers 5.x).
#: A model_type in none of this, FLAT_DECODERS and FLAT_ENCODERS has no known flattening support: refused too.
FLATTENING: dict[str, str] = {
    "deberta": _DEBERTA, "deberta-v2": _DEBERTA,
    "xlm-roberta": "its flattened forward is not tested (RoBERTa's is: model_type roberta)",
}


def check_padding(padding: str) -> None:
    """The ``padding`` option's one validation point."""
    if padding not in PADDING_OPTIONS:
        raise UserError(f"padding {padding!r}: use one of {', '.join(PADDING_OPTIONS)}")


def choose_batching(model_type: str, padding: str = "auto", calibrated: str | None = None) -> dict[str, Any]:
    """The batch layout for ``model_type`` under the ``padding`` option (what the record's ``batching`` says).

    ``calibrated``: the layout the grid's calibration measured fastest on this device (its ``padding``);
    ``auto`` takes it where it is exact for ``model_type`` (``flatten`` only for a flattening family).

    >>> choose_batching("bert", "auto", calibrated="flatten")
    {'mode': 'flattened', 'pad_to_multiple_of': 8, 'requested': 'auto', 'chosen_by': 'calibration'}
    >>> choose_batching("deberta-v2", "auto", calibrated="flatten")["mode"]  # not exact for DeBERTa: the rule
    'bucketed'

    >>> choose_batching("roberta", "bucket")
    {'mode': 'bucketed', 'pad_to_multiple_of': 8, 'requested': 'bucket'}
    >>> choose_batching("llama", "flatten")
    {'mode': 'flattened', 'pad_to_multiple_of': 8, 'requested': 'flatten'}
    >>> choose_batching("bert", "flatten")["mode"]
    'flattened'
    >>> choose_batching("deberta-v2", "flatten")
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: padding flatten is not supported for model_type deberta-v2 in sequence classification: its disentangled attention builds its mask and relative positions from attention_mask (no prepared-mask or position_ids path): DeBERTa keeps bucketed padding; use padding: auto or bucket
    """
    check_padding(padding)
    flattens = model_type in FLAT_DECODERS or model_type in FLAT_ENCODERS
    if padding == "auto" and calibrated in _MODES and (calibrated != "flatten" or flattens):
        mode = _MODES[calibrated]
        return {"mode": mode, "pad_to_multiple_of": PAD_MULTIPLE if mode != "padded" else None,
                "requested": padding, "chosen_by": "calibration"}
    if padding == "auto":
        mode = "bucketed"  # without a calibration's measurement (module docs)
    elif padding == "flatten" and not flattens:
        why = FLATTENING.get(model_type, "transformers has no known padding-free classification path for it")
        raise UserError(f"padding flatten is not supported for model_type {model_type} in sequence "
                        f"classification: {why}; use padding: auto or bucket")
    else:
        mode = _MODES[padding]
    return {"mode": mode, "pad_to_multiple_of": PAD_MULTIPLE if mode != "padded" else None,
            "requested": padding}


def check_devices(batching: dict[str, Any], n_gpu: int) -> None:
    """A flattened batch is one unit: its ``example_ends`` index the rows laid end to end, so the Trainer's
    DataParallel (one process over several visible GPUs), which cuts every tensor of a batch along its first
    dimension, would pair rows with the wrong examples. Refused there.

    >>> check_devices({"mode": "flattened"}, 2)
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: padding flatten needs one device per run, and this run sees 2 GPUs (the Trainer would split each flattened batch across them): make one GPU visible (CUDA_VISIBLE_DEVICES) or use padding: auto
    """
    if batching["mode"] == "flattened" and n_gpu > 1:
        raise UserError(f"padding flatten needs one device per run, and this run sees {n_gpu} GPUs (the Trainer "
                        "would split each flattened batch across them): make one GPU visible "
                        "(CUDA_VISIBLE_DEVICES) or use padding: auto")


def make_collator(tokenizer: Any, batching: dict[str, Any]) -> Any:
    """The data collator for a :func:`choose_batching` result (padded or bucketed: right padding; flattened:
    :class:`FlatCollator`, whose batches need :func:`~harness.finetune.flat.enable_flat_forward`)."""
    from transformers import DataCollatorWithPadding

    if batching["mode"] == "flattened":
        return FlatCollator(getattr(tokenizer, "pad_token_id", None), batching["pad_to_multiple_of"])
    if batching["mode"] not in ("padded", "bucketed"):
        raise ValueError(f"no collator for batching mode {batching['mode']!r}")
    return DataCollatorWithPadding(tokenizer, pad_to_multiple_of=batching["pad_to_multiple_of"])


#: Per-token keys a flattened batch packs (the attention mask is dropped: position_ids mark the examples).
_TOKEN_KEYS = ("input_ids", "token_type_ids")


class FlatCollator:
    """The collator of ``flattened`` batches (whose model needs :func:`harness.finetune.flat.enable_flat_forward`).

    Packs a batch's examples into rows as wide as its longest example (rounded up to ``multiple``), best
    fit longest first, ``position_ids`` restarting per example; ``example_ends`` (each example's
    last token, in the rows laid end to end) and ``example_lengths`` in the batch's order, as its labels.

    ``labels`` comes first in the batch because the Trainer's evaluation counts a batch's examples from its
    first tensor.

    >>> batch = FlatCollator(pad_token_id=0)([{"input_ids": [5, 6, 7], "labels": 1}, {"input_ids": [8, 9], "labels": 0},
    ...                                       {"input_ids": [4, 4, 4, 4, 4, 4], "labels": 1}])
    >>> batch["input_ids"].tolist()  # rows of 8 (the longest, 6, rounded up): [6 + 2], [3 + tail 5]
    [[4, 4, 4, 4, 4, 4, 8, 9], [5, 6, 7, 0, 0, 0, 0, 0]]
    >>> batch["position_ids"].tolist()
    [[0, 1, 2, 3, 4, 5, 0, 1], [0, 1, 2, 0, 1, 2, 3, 4]]
    >>> batch["example_ends"].tolist(), batch["example_lengths"].tolist(), batch["labels"].tolist()
    ([10, 7, 5], [3, 2, 6], [1, 0, 1])
    """

    def __init__(self, pad_token_id: int | None = None, multiple: int = 8):
        self.pad_token_id = pad_token_id or 0  # tail tokens: a block of their own, never read
        self.multiple = multiple

    def __call__(self, features: Sequence[dict[str, Any]]) -> dict[str, Any]:
        import torch

        lengths = [len(f["input_ids"]) for f in features]
        width = padded_width(lengths, self.multiple)
        starts = best_fit_rows(lengths, width)  # per example: (row, column of its first token)
        n_rows = 1 + max(row for row, _ in starts)
        batch: dict[str, Any] = {}
        key = next((k for k in ("labels", "label", "label_ids") if k in features[0]), None)
        if key is not None:  # as DataCollatorWithPadding: a dataset's "label" column becomes "labels"
            batch["labels"] = torch.tensor([f[key] for f in features])
        for name in _TOKEN_KEYS:
            if name in features[0]:
                values = torch.full((n_rows, width), self.pad_token_id if name == "input_ids" else 0,
                                    dtype=torch.long)
                for f, (row, col) in zip(features, starts):
                    values[row, col:col + len(f[name])] = torch.tensor(f[name], dtype=torch.long)
                batch[name] = values
        positions = torch.zeros((n_rows, width), dtype=torch.long)
        ends = [0] * n_rows  # per row: the column after its last example
        for n, (row, col) in zip(lengths, starts):
            positions[row, col:col + n] = torch.arange(n)
            ends[row] = max(ends[row], col + n)
        for row, end in enumerate(ends):  # the tail restarts too: a block of its own
            positions[row, end:] = torch.arange(width - end)
        batch["position_ids"] = positions
        batch["example_ends"] = torch.tensor([row * width + col + n - 1 for n, (row, col) in zip(lengths, starts)],
                                             dtype=torch.long)
        batch["example_lengths"] = torch.tensor(lengths, dtype=torch.long)
        return batch


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


def best_fit_rows(lengths: Sequence[int], row_length: int) -> list[tuple[int, int]]:
    """Where each example goes when packed into rows of ``row_length`` tokens best-fit decreasing (longest
    first, each into the fullest row it still fits): ``(row, column of its first token)``, in the examples'
    order. :class:`FlatCollator` lays out a flattened batch this way.

    >>> best_fit_rows([3, 5, 3, 5], 8)  # rows [5, 3] and [5, 3]
    [(1, 5), (0, 0), (0, 5), (1, 0)]
    """
    by_room: list[list[int]] = [[] for _ in range(row_length + 1)]  # by_room[c]: rows with c tokens of room
    used: list[int] = []  # tokens placed per row
    starts = [(0, 0)] * len(lengths)
    for i in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        n = lengths[i]
        if not 0 < n <= row_length:
            raise ValueError(f"an example of {n} tokens does not fit rows of {row_length}")
        room = next((c for c in range(n, row_length + 1) if by_room[c]), None)
        if room is None:
            row, room = len(used), row_length
            used.append(0)
        else:
            row = by_room[room].pop()
        starts[i] = (row, used[row])
        used[row] += n
        by_room[room - n].append(row)
    return starts


def best_fit_rows_share(lengths: Sequence[int], row_length: int) -> float:
    """Padding share when the examples are packed into rows of ``row_length`` tokens by :func:`best_fit_rows`:
    near the least padding rows can have.

    >>> best_fit_rows_share([5, 3, 3, 5], 8)  # rows [5, 3] and [5, 3]: no padding
    0.0
    """
    rows = 1 + max(row for row, _ in best_fit_rows(lengths, row_length))
    return 1 - sum(lengths) / (rows * row_length)


def flattened_share(batches: Sequence[Sequence[int]], multiple: int | None = PAD_MULTIPLE) -> float:
    """Padding share of flattened batches (:class:`FlatCollator`): each batch's
    examples packed by :func:`best_fit_rows` into rows of its :func:`padded_width`.

    >>> round(flattened_share([[6, 3, 2]]), 6)  # rows of 8: [6, 2] and [3]: 16 computed, 11 real
    0.3125
    """
    real = computed = 0
    for lengths in batches:
        width = padded_width(lengths, multiple)
        real += sum(lengths)
        computed += width * (1 + max(row for row, _ in best_fit_rows(lengths, width)))
    return 1 - real / computed
