"""Padding-free (flattened) sequence classification: the decoders and the BERT-family encoders.

A flattened batch packs the batch's examples (the recipe's examples; none added, none dropped) into rows
as wide as its longest example rounded up to a multiple of 8, best fit (longest first, each into the fullest
row it still fits; the labels and predictions keep the batch's order), so a row holds several examples back
to back with ``position_ids`` restarting at 0 for each, and no ``attention_mask``. Only the rows' unfilled
tails are padding (6-22 % of GLUE's tokens at batch 32 in random order, against 32-67 % padded: ``python
scripts/bench_finetune.py --padding-report``), and no row is wider than the padded batch would be, so
attention costs at most what it costs padded (one single row of every example would cost the square of the
batch's tokens). The batch itself comes from :class:`harness.finetune.batching.FlatCollator`;
:func:`enable_flat_forward` gives the model a forward that scores each example; a batch without
``example_ends`` (a padded one) takes the class's own forward. tests/test_padding_free.py checks the loss,
every gradient and the predictions equal the padded batch's, per family and attention backend.

**Decoders** (:data:`~harness.finetune.batching.FLAT_DECODERS`): transformers already computes such a row as
separate sequences: with ``position_ids`` and no mask (and no cache) their causal mask is block-diagonal
(``masking_utils.find_packed_sequence_indices``; a tail is a block of its own), and a varlen attention kernel
(``attn_implementation: flash_attention_2``) reads the same boundaries from ``position_ids``. What they lack
is the pooling: ``…ForSequenceClassification`` scores the last non-pad token of each *row*; the flat forward
scores the last token of each *example* (``example_ends``) with the model's own ``score`` head and loss.

**Encoders** (:data:`~harness.finetune.batching.FLAT_ENCODERS`: BERT, RoBERTa/DistilRoBERTa, ALBERT,
DistilBERT, ELECTRA): their bidirectional mask ignores packed ``position_ids``, so the flat forward hands the
body the attention that keeps each example to itself, in the form the configured backend takes
(:data:`ATTENTION_LAYOUTS`, read from ``config._attn_implementation``):

* ``sdpa``: a boolean block-diagonal 4-D mask ``[rows, 1, width, width]`` (``masking_utils`` returns a
  prepared 4-D mask unchanged; torch's SDPA takes a boolean mask as is);
* ``eager``: the same block-diagonal mask, additive (0 inside an example, the dtype's minimum outside), as
  ``eager_attention_forward`` adds the mask to the scores;
* ``flex_attention``: a ``BlockMask`` built from each token's example index, so flex skips the blocks between
  examples instead of adding a dense mask;
* ``flash_attention_2`` / ``_3`` / ``_4``: no mask; the examples' boundaries as ``cu_seq_lens_q/k`` and
  ``max_length_q/k`` (the rows laid end to end, each tail a sequence of its own), which transformers' flash
  path hands to the varlen kernel, which computes only the diagonal blocks. (Position ids cannot carry them
  for RoBERTa, whose positions start at ``padding_idx + 1``, and explicit boundaries skip the detection.)

Any other backend is refused (:func:`check_flat_attention`). Positions restart per example from the family's
first position (:data:`FIRST_POSITION`: RoBERTa's is ``pad_token_id + 1``), ``token_type_ids`` are each
example's own (the collator packs them), and each example's first token (``[CLS]``/``<s>``) is pooled by the
model's own forward: a forward hook on the body's layer stack (``FLAT_ENCODERS[model_type]``) hands on, in
place of the rows' hidden states, the first tokens of the examples as ``[examples, 1, hidden]``, so the
class's own pooler, dropout, head and loss run on exactly what they see in a padded batch.
DeBERTa(-v2) builds relative positions and its mask from ``attention_mask`` with no prepared-mask path: it
keeps bucketed padding (refused in :func:`harness.finetune.batching.choose_batching`).
"""

from __future__ import annotations

import functools
import types
from typing import Any

import torch

from ranking.floor.errors import UserError

#: attn_implementation -> how a flattened encoder batch keeps its examples apart (module docs).
ATTENTION_LAYOUTS: dict[str, str] = {
    "sdpa": "boolean mask", "eager": "additive mask", "flex_attention": "block mask",
    "flash_attention_2": "varlen", "flash_attention_3": "varlen", "flash_attention_4": "varlen",
}

#: model_type -> the position id of each example's first token (default 0), from its config.
FIRST_POSITION: dict[str, Any] = {"roberta": lambda config: int(config.pad_token_id) + 1}


def check_flat_attention(model_type: str, attn_implementation: str | None) -> None:
    """Refuse a flattened encoder on an attention backend that cannot keep packed examples apart (one line).
    ``None`` (not chosen yet: transformers' default, sdpa) passes; decoders are not checked here.

    >>> check_flat_attention("bert", "sdpa")
    >>> check_flat_attention("bert", "paged|sdpa")
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: padding flatten for model_type bert needs an attention backend that keeps packed examples apart: attn_implementation 'paged|sdpa' is not one of sdpa, eager, flex_attention, flash_attention_2, flash_attention_3, flash_attention_4; use one of them or padding: auto
    """
    from harness.finetune.batching import FLAT_ENCODERS

    if model_type not in FLAT_ENCODERS or attn_implementation is None or attn_implementation in ATTENTION_LAYOUTS:
        return
    raise UserError(f"padding flatten for model_type {model_type} needs an attention backend that keeps packed "
                    f"examples apart: attn_implementation {attn_implementation!r} is not one of "
                    f"{', '.join(ATTENTION_LAYOUTS)}; use one of them or padding: auto")


def packed_attention(attn_implementation: str, position_ids: torch.Tensor, dtype: torch.dtype) -> dict[str, Any]:
    """The keyword arguments that keep a flattened batch's examples apart on this backend (module docs). An
    example (and a row's tail) is the run of tokens from a position 0 to the next.

    >>> pos = torch.tensor([[0, 1, 2, 0, 1, 0]])
    >>> packed_attention("sdpa", pos, torch.float32)["attention_mask"][0, 0].int().tolist()[3]
    [0, 0, 0, 1, 1, 0]
    >>> {k: v.tolist() if hasattr(v, "tolist") else v for k, v in packed_attention("flash_attention_2", pos, torch.float32).items()}
    {'cu_seq_lens_q': [0, 3, 5, 6], 'cu_seq_lens_k': [0, 3, 5, 6], 'max_length_q': 3, 'max_length_k': 3}
    """
    layout = ATTENTION_LAYOUTS[attn_implementation]
    starts = position_ids.reshape(-1) == 0
    if layout == "varlen":
        bounds = torch.cat([starts.nonzero().flatten(), starts.new_tensor([starts.numel()], dtype=torch.long)])
        cu = bounds.to(torch.int32)
        longest = int(bounds.diff().max())
        return {"cu_seq_lens_q": cu, "cu_seq_lens_k": cu, "max_length_q": longest, "max_length_k": longest}
    example = starts.cumsum(0).reshape(position_ids.shape)  # each token's example index (rows laid end to end)
    if layout == "block mask":
        from torch.nn.attention.flex_attention import create_block_mask

        rows, width = example.shape

        def same_example(b: Any, h: Any, q: Any, kv: Any) -> Any:
            return example[b, q] == example[b, kv]

        return {"attention_mask": create_block_mask(same_example, rows, None, width, width,
                                                    device=position_ids.device)}
    same = (example[:, :, None] == example[:, None, :])[:, None]  # [rows, 1, width, width]
    if layout == "boolean mask":
        return {"attention_mask": same}
    zero = torch.zeros((), dtype=dtype, device=same.device)
    return {"attention_mask": torch.where(same, zero, torch.finfo(dtype).min)}


def _first_tokens(starts: torch.Tensor, module: Any, args: Any, output: Any) -> Any:
    """Forward hook on an encoder's layer stack: its rows' hidden states → each example's first token,
    ``[examples, 1, hidden]``, so the body's pooler and the head read ``[:, 0]`` as they do in a padded batch."""
    hidden = output.last_hidden_state
    output.last_hidden_state = hidden.reshape(-1, hidden.shape[-1])[starts].unsqueeze(1)
    return output


def flat_forward(self: Any, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                 position_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                 token_type_ids: torch.Tensor | None = None, example_ends: torch.Tensor | None = None,
                 example_lengths: torch.Tensor | None = None, **kwargs: Any) -> Any:
    """The forward :func:`enable_flat_forward` installs on a decoder: a flattened batch scored per example,
    anything else by the class's own forward. (Its parameters are the columns the Trainer keeps in a dataset;
    ``example_lengths`` is read by the token accounting's hook, not here.)"""
    if token_type_ids is not None:
        kwargs["token_type_ids"] = token_type_ids
    if example_ends is None:
        return type(self).forward(self, input_ids=input_ids, attention_mask=attention_mask,
                                  position_ids=position_ids, labels=labels, **kwargs)
    from transformers.modeling_outputs import SequenceClassifierOutputWithPast

    loss_kwargs = {k: kwargs.pop(k) for k in ("num_items_in_batch",) if k in kwargs}
    body = getattr(self, self.base_model_prefix)
    # no mask and no cache: the body's causal mask is block-diagonal along the packed position_ids
    hidden = body(input_ids=input_ids, position_ids=position_ids, use_cache=False, **kwargs).last_hidden_state
    # the head on each example's last token: [examples, labels], in the batch's order
    logits = self.score(hidden.reshape(-1, hidden.shape[-1])[example_ends])
    loss = None
    if labels is not None:
        loss = self.loss_function(labels=labels, pooled_logits=logits, config=self.config, **loss_kwargs)
    return SequenceClassifierOutputWithPast(loss=loss, logits=logits)


def encoder_flat_forward(self: Any, input_ids: torch.Tensor | None = None,
                         attention_mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                         labels: torch.Tensor | None = None, token_type_ids: torch.Tensor | None = None,
                         example_ends: torch.Tensor | None = None, example_lengths: torch.Tensor | None = None,
                         **kwargs: Any) -> Any:
    """The forward :func:`enable_flat_forward` installs on an encoder: a flattened batch through the class's own
    forward with each example's attention, positions and first token (module docs); anything else unchanged."""
    from harness.finetune.batching import FLAT_ENCODERS

    if token_type_ids is not None:
        kwargs["token_type_ids"] = token_type_ids
    if example_ends is None:
        return type(self).forward(self, input_ids=input_ids, attention_mask=attention_mask,
                                  position_ids=position_ids, labels=labels, **kwargs)
    config = self.config
    kwargs.update(packed_attention(config._attn_implementation, position_ids, self.dtype))
    first = FIRST_POSITION.get(config.model_type)
    if first is not None:
        position_ids = position_ids + first(config)
    stack = getattr(getattr(self, self.base_model_prefix), FLAT_ENCODERS[config.model_type])
    hook = stack.register_forward_hook(functools.partial(_first_tokens, example_ends - example_lengths + 1))
    try:
        return type(self).forward(self, input_ids=input_ids, position_ids=position_ids, labels=labels, **kwargs)
    finally:
        hook.remove()


def enable_flat_forward(model: Any) -> Any:
    """Give this model instance (a transformers ``…ForSequenceClassification`` of a flattening family:
    :data:`~harness.finetune.batching.FLAT_DECODERS` with a ``score`` head, or
    :data:`~harness.finetune.batching.FLAT_ENCODERS` on a backend of :data:`ATTENTION_LAYOUTS`) the
    flattened-batch forward; its class, weights and checkpoints are unchanged. Call it before wrapping the
    model (PEFT calls the inner model's ``forward``)."""
    from harness.finetune.batching import FLAT_ENCODERS

    config = getattr(model, "config", None)
    model_type = getattr(config, "model_type", None)
    prefix = getattr(model, "base_model_prefix", "")
    body = getattr(model, prefix, None) if prefix else None
    if model_type in FLAT_ENCODERS and body is not None and hasattr(body, FLAT_ENCODERS[model_type]):
        check_flat_attention(model_type, config._attn_implementation)
        model.forward = types.MethodType(encoder_flat_forward, model)
        return model
    if not (hasattr(model, "score") and body is not None):
        raise ValueError(f"{type(model).__name__} has no score head and body to score flattened examples with")
    model.forward = types.MethodType(flat_forward, model)
    return model
