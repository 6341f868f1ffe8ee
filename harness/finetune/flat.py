"""Padding-free (flattened) sequence classification for decoder families.

A flattened batch packs the batch's examples (the recipe's examples; none added, none dropped) into rows
as wide as its longest example rounded up to a multiple of 8, best fit (longest first, each into the fullest
row it still fits; the labels and predictions keep the batch's order), so a row holds several examples back
to back with ``position_ids`` restarting at 0 for each, and no ``attention_mask``. Only the rows' unfilled
tails are padding (6-22 % of GLUE's tokens at batch 32 in random order, against 32-67 % padded: ``python
scripts/bench_finetune.py --padding-report``), and no row is wider than the padded batch would be, so
attention costs at most what it costs padded (one single row of every example would cost the square of the
batch's tokens).

transformers' decoders already compute such a row as separate sequences: with ``position_ids`` and no mask
(and no cache) their causal mask is block-diagonal (``masking_utils.find_packed_sequence_indices``; a tail
is a block of its own), and a varlen attention kernel (``attn_implementation: flash_attention_2``) reads the
same boundaries from ``position_ids``. What they lack is the pooling: ``…ForSequenceClassification`` scores
the last non-pad token of each *row*. :func:`enable_flat_forward` gives the model a forward that scores the
last token of each *example* (``example_ends``, indices into the rows laid end to end) with the model's own
head and loss function; a batch without ``example_ends`` (a padded one) takes the class's own forward.
The batch itself comes from :class:`harness.finetune.batching.FlatCollator`. tests/test_padding_free.py checks
the loss, gradients and predictions equal the padded batch's.
"""

from __future__ import annotations

import types
from typing import Any

import torch


def flat_forward(self: Any, input_ids: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                 position_ids: torch.Tensor | None = None, labels: torch.Tensor | None = None,
                 token_type_ids: torch.Tensor | None = None, example_ends: torch.Tensor | None = None,
                 example_lengths: torch.Tensor | None = None, **kwargs: Any) -> Any:
    """The forward :func:`enable_flat_forward` installs: a flattened batch scored per example, anything else by
    the class's own forward. (Its parameters are the columns the Trainer keeps in a dataset;
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


def enable_flat_forward(model: Any) -> Any:
    """Give this model instance (a transformers decoder ``…ForSequenceClassification``: ``score`` head, body
    at ``base_model_prefix``) the flattened-batch forward; its class, weights and checkpoints are unchanged.
    Call it before wrapping the model (PEFT calls the inner model's ``forward``)."""
    prefix = getattr(model, "base_model_prefix", "")
    if not (hasattr(model, "score") and prefix and hasattr(model, prefix)):
        raise ValueError(f"{type(model).__name__} has no score head and body to score flattened examples with")
    model.forward = types.MethodType(flat_forward, model)
    return model
