"""Settings of a fine-tuning run checked against the model's own dimensions, before anything loads.

Read from the model's config alone (:func:`harness.models.model_dimensions`: no weights, no torch), so a
setting the model cannot hold is one line at a run's entry instead of a failure mid-training:

* ``max_length`` beyond the model's position embeddings (``max_position_embeddings``, GPT-2's
  ``n_positions``) would index past the table (an ``IndexError`` in the first batch that long);
* a LoRA rank ``r`` above the model's hidden size adds nothing a full-rank update does not have, and a
  huge one (``r=10**9``) asks for terabytes when the adapters are allocated;
* ``model_args: {attn_implementation: flex_attention}`` on a model with attention dropout: transformers'
  flex path refuses dropout in training (a ``ValueError`` at the first step; seen on an H100 with
  ``scripts/bench_attention.py``), so it is refused here, with the backends that train.
"""

from __future__ import annotations

from typing import Any

from ranking.floor.errors import UserError

__all__ = ["check_fits_dimensions", "check_fits_model"]


def check_fits_model(spec: Any, info: Any) -> None:
    """Refuse (one-line :class:`UserError`) a ``spec`` whose ``max_length`` or LoRA ``r`` the model ``info``
    cannot hold. A model whose config cannot be read now (a hub model not cached, offline) is not checked
    here: its load says why it cannot run.

    >>> from harness.models import resolve_model
    >>> from harness.specs import FinetuneSpec
    >>> check_fits_model(FinetuneSpec("tiny:bert", "rte", 0, max_length=4096), resolve_model("tiny:bert"))
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: max_length 4096 is beyond tiny:bert's positions: its position embeddings hold 512 tokens (max_position_embeddings); give max_length 512 or less
    """
    from harness.models import model_dimensions

    check_fits_dimensions(spec, info.name, model_dimensions(info))


def check_fits_dimensions(spec: Any, name: str, dims: Any) -> None:
    """:func:`check_fits_model` given the model's :class:`harness.models.ModelDimensions` (``None``: unknown,
    nothing checked); a grid's load gives those read from disk only
    (:func:`harness.models.dimensions_on_disk`)."""
    if dims is None:
        return
    if dims.positions is not None and spec.max_length > dims.positions:
        raise UserError(f"max_length {spec.max_length} is beyond {name}'s positions: its position embeddings "
                        f"hold {dims.positions} tokens (max_position_embeddings); give max_length {dims.positions} "
                        "or less")
    args = dict(spec.model_args or ())
    dropout = args.get("attention_probs_dropout_prob", dims.attention_dropout)
    if args.get("attn_implementation") == "flex_attention" and dropout:
        raise UserError(f"attn_implementation flex_attention cannot train {name}: the model drops attention "
                        f"probabilities ({dropout:g}) and transformers' flex attention refuses dropout in "
                        "training; use sdpa (the default) or eager, whose flattened batches give the same loss")
    rank = dict(spec.peft or ()).get("r")
    if rank is not None and dims.hidden_size is not None and int(rank) > dims.hidden_size:
        raise UserError(f"peft: r {rank} is above {name}'s hidden size {dims.hidden_size}: a LoRA rank is at "
                        f"most the hidden size (the usual is 8 to 64); give r={min(8, dims.hidden_size)} or up to "
                        f"r={dims.hidden_size}")
