"""Fused runs: the seeds of one grid cell trained as one process and one stacked model (horizontal fusion).

The runs of a cell differ only in seed, learning rate or weight decay (same model, task and otherwise the same
recipe). Launched one per process, each pays one
kernel launch per operation per step, and a GPU running one small model is launch-bound (7 % utilisation at
one bert-base run per H100, issue 35). Fused, the K runs' weights are stacked along a new first dimension
(``torch.func.stack_module_state``) and one ``vmap(grad(...))`` computes the K runs' losses and gradients in
the same kernels (HFTA, Wang et al., MLSys 2021).

Each fused run stays a run:

* **weights**: its own slice of the stacked parameters, initialised exactly as the run alone is
  (:func:`harness.models.load_model` with its seed);
* **optimizer**: AdamW applied elementwise to the stacked tensors with per-run state (first and second
  moments), the Trainer's recipe: decay on the Trainer's decay parameters only, the linear schedule with
  warm-up, gradient clipping at 1.0 by each run's own gradient norm;
* **data order**: its seed's sampler (the Trainer's: a random permutation seeded ``seed + epoch``), batches
  padded to the group's widest example rounded up to a multiple of 8, masked by a prepared 4-D additive mask
  (a 2-D padding mask goes through data-dependent code that ``vmap`` cannot batch);
* **dropout**: ``vmap(..., randomness="different")``: every run draws its own masks; the draws are seeded per
  (group, step), so a fused group is reproducible, also across a resume;
* **evaluation, checkpoint, record**: evaluated after each epoch with its own metrics; its own checkpoint
  folder (``<output>/checkpoints/<run_id>/checkpoint-<step>``, complete once marked, as a solo run's); its own
  record under its own run id, with ``fused`` saying the group it trained in;
* **faults**: a run whose loss or gradient norm turns non-finite stops alone: its weights and optimizer state
  freeze from that step, its record is ``failed`` (the run diverged), the others train on.

Run identity: the fused layout is not part of what a result means (the rule of ``padding: auto``): a fused run
has the run id of the same run alone, a stored run is done whichever layout it ran in, and its record names the
group (``fused``). Dropout draws differ between a run fused and alone (statistically alike, numerically not);
with dropout off a fused run computes its solo twin's losses, gradients and weights within float rounding
(tests/test_fused.py: 1e-5 relative over 20+ steps, per family).

Families (:data:`FUSABLE`): BERT, RoBERTa/DistilRoBERTa, ALBERT, DistilBERT, ELECTRA (the model's own forward
with the 4-D mask) and GPT-2 (the body's last hidden state gathered at each example's last real token by a
precomputed index, then the model's own ``score`` head: GPT-2's own pooling searches for the pad token, data
dependent). Attention runs ``eager`` inside ``vmap`` (CPU sdpa has no batching rule). DeBERTa is refused
(:data:`NOT_FUSABLE`). Runs that cannot fuse (an explicit ``padding: flatten``, ``compile: on``, LoRA, an
attention backend of their own) train alone.

Energy (:func:`split_efficiency`): one meter reading for the group, each run's share by its computed tokens
(equal in a group: the same batch shapes), the shares summing exactly to the reading.
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ranking.floor.errors import UserError

log = logging.getLogger(__name__)

#: model_types whose classifier vmaps over stacked copies with a prepared 4-D mask (tests/test_fused.py)
FUSABLE = frozenset({"bert", "roberta", "albert", "distilbert", "electra", "gpt2"})
#: model_types that pool the last real token (a gather at a precomputed index instead of their own pooling)
LAST_TOKEN = frozenset({"gpt2"})
#: model_type -> why its runs cannot be fused
NOT_FUSABLE = {
    "deberta": "DeBERTa builds its relative positions and mask from attention_mask with nonzero() (data-dependent "
               "shapes vmap cannot batch): its runs train alone",
    "deberta-v2": "DeBERTa-v2 builds its relative positions and mask from attention_mask with nonzero() "
                  "(data-dependent shapes vmap cannot batch): its runs train alone",
}
PAD_MULTIPLE = 8
STATE_FILE = "vnr-fused-state.pt"
TRAINER_STATE = "trainer_state.json"
ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8
MAX_GRAD_NORM = 1.0
# spec fields that keep a run out of fused groups: their own layout, compiled step, a mixed precision asked for
# (a fused group trains in fp32) or length-grouped batches (a fused group samples in the seed's random order)
_SOLO_FIELDS = {"padding": ("auto", "bucket", "pad"), "compile": ("auto", "off"), "precision": ("auto", "fp32"),
                "group_by_length": (False,)}


# ---------------------------------------------------------------------- the option
def check_fusable(model_type: str) -> None:
    """Refuse a family whose runs cannot be fused (one line, the reason)."""
    if model_type in NOT_FUSABLE:
        raise UserError(f"fuse: {NOT_FUSABLE[model_type]}")
    if model_type not in FUSABLE:
        raise UserError(f"fuse: model_type {model_type} was never checked to vmap exactly; its runs train alone "
                        f"(fusable: {', '.join(sorted(FUSABLE))})")


def fusable_spec(spec: Any) -> bool:
    """Whether this run may train in a fused group (a fine-tuning run of a fusable family, on the default
    layout, not compiled, in fp32 or precision auto, in random order, without LoRA or an attention backend of its
    own)."""
    if getattr(spec, "kind", None) != "finetune" or spec.peft:
        return False
    if any(getattr(spec, key) not in allowed for key, allowed in _SOLO_FIELDS.items()):
        return False
    if "attn_implementation" in dict(spec.model_args or ()):
        return False
    from harness.models import resolve_model

    try:
        return resolve_model(spec.model, spec.model_args).family in FUSABLE
    except Exception:  # a model that does not resolve offline: its own run says why
        return False


#: what the runs of one fused group may differ in: each run's own seed, and the scalars the stacked AdamW holds
#: per run (a swept learning rate or weight decay)
PER_RUN = ("seed", "learning_rate", "weight_decay")


def cell_key(spec: Any) -> str:
    """What the runs of one fused group share: the run's identity without :data:`PER_RUN`."""
    identity = {k: v for k, v in spec.identity().items() if k not in PER_RUN}
    return json.dumps(identity, sort_keys=True, default=str)


def fuse_groups(specs: Sequence[Any], k: int) -> list[list[Any]]:
    """The specs in groups to train together: runs of one cell (differing only in :data:`PER_RUN`), at most ``k``
    a group, in the order of their first run; a run that cannot fuse (:func:`fusable_spec`) is a group of its own.

    >>> from harness.specs import FinetuneSpec
    >>> runs = [FinetuneSpec("tiny:bert", "rte", s) for s in range(3)] + [FinetuneSpec("tiny:gpt2", "rte", 0)]
    >>> [[s.seed for s in g] for g in fuse_groups(runs, 2)]
    [[0, 1], [2], [0]]
    """
    if k <= 1:
        return [[s] for s in specs]
    groups: list[list[Any]] = []
    open_by_cell: dict[str, list[Any]] = {}
    for spec in specs:
        if not fusable_spec(spec):
            groups.append([spec])
            continue
        key = cell_key(spec)
        group = open_by_cell.get(key)
        if group is None or len(group) >= k:
            group = []
            open_by_cell[key] = group
            groups.append(group)
        group.append(spec)
    return groups


def group_id(specs: Sequence[Any]) -> str:
    """A fused group's name: ``fused-<12 hex of its run ids>``."""
    digest = hashlib.sha256("\n".join(s.run_id() for s in specs).encode()).hexdigest()[:12]
    return f"fused-{digest}"


# ---------------------------------------------------------------------- the stacked model
class _Pooled:
    """The per-run function ``vmap`` batches: logits of one run's batch from its parameters."""

    def __init__(self, base: Any, last_token: bool, token_types: bool):
        self.base, self.last_token, self.token_types = base, last_token, token_types

    def logits(self, params: dict[str, Any], buffers: dict[str, Any], batch: Mapping[str, Any]) -> Any:
        from torch.func import functional_call

        if self.last_token:  # GPT-2: the body, then the score head at each example's last real token
            prefix = self.base.base_model_prefix
            body = getattr(self.base, prefix)
            cut = len(prefix) + 1
            sub = ({k[cut:]: v for k, v in params.items() if k.startswith(prefix + ".")},
                   {k[cut:]: v for k, v in buffers.items() if k.startswith(prefix + ".")})
            hidden = functional_call(body, sub, (), {"input_ids": batch["input_ids"],
                                                     "attention_mask": batch["mask"], "use_cache": False})
            hidden = hidden.last_hidden_state
            index = batch["last"][:, None, None].expand(-1, 1, hidden.shape[-1])
            pooled = hidden.gather(1, index).squeeze(1)
            head = {k[len("score."):]: v for k, v in params.items() if k.startswith("score.")}
            return functional_call(self.base.score, head, (pooled,))
        kwargs = {"input_ids": batch["input_ids"], "attention_mask": batch["mask"]}
        if self.token_types and "token_type_ids" in batch:
            kwargs["token_type_ids"] = batch["token_type_ids"]
        return functional_call(self.base, (params, buffers), (), kwargs).logits


def classification_loss(logits: Any, labels: Any, regression: bool, weight: Any = None) -> Any:
    """The loss the transformers classifiers compute (mean squared error for one output, else cross-entropy).

    ``weight`` (0/1 per example, static-shape batches): the mean over the examples of weight 1, the padding rows
    of a batch filled to its static size (:func:`stack_batches`) left out (selected away, so nothing they compute
    reaches the loss or the gradients)."""
    import torch
    import torch.nn.functional as F

    if weight is None:
        if regression:
            return F.mse_loss(logits.squeeze(-1), labels.to(logits.dtype))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1))
    if regression:
        each = (logits.squeeze(-1) - labels.to(logits.dtype)) ** 2
    else:
        each = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
    real = weight.reshape(-1) > 0
    return torch.where(real, each.reshape(-1), torch.zeros_like(each.reshape(-1))).sum() / real.sum()


class StackedRuns:
    """K models of one architecture as one stacked model with per-run AdamW (module docs).

    ``models``: the K runs' models (their weights are copied; the models are left as they are).
    ``learning_rates`` / ``weight_decays``: one per run. ``decay``: parameter names weight decay applies to
    (the Trainer's: not biases, not norms).
    """

    def __init__(self, models: Sequence[Any], *, learning_rates: Sequence[float], weight_decays: Sequence[float],
                 regression: bool, decay: set[str] | None = None, max_grad_norm: float | None = MAX_GRAD_NORM):
        import inspect

        import torch
        from torch.func import stack_module_state

        model_type = models[0].config.model_type
        check_fusable(model_type)
        self.k = len(models)
        base = copy.deepcopy(models[0])
        _eager_attention(base)
        self.base = base.to("meta")
        params, buffers = stack_module_state(list(models))
        self.params = {n: p.detach().clone() for n, p in params.items()}
        self.buffers = {n: b.detach().clone() for n, b in buffers.items()}
        self.exp_avg = {n: torch.zeros_like(p) for n, p in self.params.items()}
        self.exp_avg_sq = {n: torch.zeros_like(p) for n, p in self.params.items()}
        self.dtype = next(iter(self.params.values())).dtype
        self.device = next(iter(self.params.values())).device  # the models' (moved there before stacking)
        self.steps = torch.zeros(self.k, dtype=torch.long, device=self.device)
        self.active = torch.ones(self.k, dtype=torch.bool, device=self.device)
        self.lr = torch.tensor(list(learning_rates), dtype=torch.float64, device=self.device)
        self.wd = torch.tensor(list(weight_decays), dtype=torch.float64, device=self.device)
        self.decay = set(self.params) if decay is None else set(decay)
        self.regression = regression
        self.max_grad_norm = max_grad_norm
        accepts = inspect.signature(type(models[0]).forward).parameters
        self.fn = _Pooled(self.base, model_type in LAST_TOKEN, "token_type_ids" in accepts)
        self._captured: Any = None  # the compiled whole step (captured_step), built on first use

    # -- compute
    def _loss(self, params: dict[str, Any], buffers: dict[str, Any], batch: Mapping[str, Any]) -> Any:
        return classification_loss(self.fn.logits(params, buffers, batch), batch["labels"], self.regression,
                                   batch.get("weight"))

    def loss_and_grads(self, batch: Mapping[str, Any], *, train: bool = True) -> tuple[Any, dict[str, Any]]:
        """(losses [K], gradients {name: [K, ...]}) of one step; ``batch`` tensors are ``[K, ...]``."""
        from torch.func import grad_and_value, vmap

        self.base.train(train)
        fn = vmap(grad_and_value(self._loss), in_dims=(0, 0, 0), randomness="different")
        grads, losses = fn(self.params, self.buffers, dict(batch))
        return losses.detach(), grads

    def logits(self, batch: Mapping[str, Any]) -> Any:
        """Eval-mode logits ``[K, B, labels]`` of one batch shared by every run (``[B, ...]`` tensors)."""
        import torch
        from torch.func import vmap

        self.base.eval()
        with torch.no_grad():
            return vmap(self.fn.logits, in_dims=(0, 0, None))(self.params, self.buffers, dict(batch))

    def grad_norms(self, grads: Mapping[str, Any]) -> Any:
        """Each run's total gradient norm (the norm of its tensors' norms, as ``clip_grad_norm_``)."""
        import torch

        per = torch.stack([g.reshape(self.k, -1).norm(dim=1) for g in grads.values()], dim=1)
        return per.norm(dim=1)

    def step(self, grads: Mapping[str, Any], lr_factor: float, norms: Any | None = None) -> None:
        """One AdamW step per active run (``torch.optim.AdamW``'s update, elementwise with per-run learning rate
        and decay), after clipping each run's gradients to :attr:`max_grad_norm` by its own norm."""
        if norms is None:
            norms = self.grad_norms(grads)
        self.params, self.exp_avg, self.exp_avg_sq, self.steps = self._adamw(
            self.params, self.exp_avg, self.exp_avg_sq, self.steps, self.active, grads, norms, lr_factor)

    def _adamw(self, params: dict[str, Any], exp_avg: dict[str, Any], exp_avg_sq: dict[str, Any], steps: Any,
               active: Any, grads: Mapping[str, Any], norms: Any, lr_factor: Any) -> tuple[Any, Any, Any, Any]:
        """:meth:`step` as a pure function of the state (new weights, moments and step counts; an inactive run's
        unchanged): what the eager step assigns and the captured step (:meth:`captured_step`) returns."""
        import torch

        b1, b2 = ADAM_BETAS
        scale = torch.ones(self.k, device=self.device)
        if self.max_grad_norm is not None:
            scale = (self.max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
        steps = steps + active.long()
        step = steps.clamp(min=1).double()
        lr = (self.lr * lr_factor)
        bias1 = 1 - b1 ** step
        bias2_sqrt = (1 - b2 ** step).sqrt()
        new_params, new_avg, new_sq = {}, {}, {}
        for name, p in params.items():
            shape = (self.k,) + (1,) * (p.dim() - 1)
            g = grads[name] * scale.view(shape).to(p.dtype)
            on = active.view(shape)
            m = exp_avg[name]
            v = exp_avg_sq[name]
            new_m = m.lerp(g, 1 - b1)
            new_v = v * b2 + (1 - b2) * g * g
            decay = (lr * self.wd) if name in self.decay else torch.zeros_like(lr)
            new_p = p * (1 - decay).view(shape).to(p.dtype)
            denom = new_v.sqrt() / bias2_sqrt.view(shape).to(p.dtype) + ADAM_EPS
            new_p = new_p - (lr / bias1).view(shape).to(p.dtype) * new_m / denom
            new_params[name] = torch.where(on, new_p, p)
            new_avg[name] = torch.where(on, new_m, m)
            new_sq[name] = torch.where(on, new_v, v)
        return new_params, new_avg, new_sq, steps

    # -- the captured step
    def _whole_step(self, params: dict[str, Any], buffers: dict[str, Any], exp_avg: dict[str, Any],
                    exp_avg_sq: dict[str, Any], steps: Any, active: Any, batch: Mapping[str, Any],
                    lr_factor: Any) -> tuple[Any, ...]:
        """One whole training step as a pure function of tensors, no Python decision on a value: the K runs'
        losses and gradients, each run's gradient norm, a run whose loss or norm is not finite stopped (``newly``),
        the AdamW update. What :meth:`captured_step` compiles into one graph."""
        import torch
        from torch.func import grad_and_value, vmap

        grads, losses = vmap(grad_and_value(self._loss), in_dims=(0, 0, 0), randomness="different")(
            params, buffers, batch)
        norms = self.grad_norms(grads)
        finite = torch.isfinite(losses) & torch.isfinite(norms)
        newly = active & ~finite
        active = active & finite
        params, exp_avg, exp_avg_sq, steps = self._adamw(params, exp_avg, exp_avg_sq, steps, active, grads, norms,
                                                         lr_factor)
        return params, exp_avg, exp_avg_sq, steps, active, losses.detach(), norms, newly

    def captured_step(self, batch: Mapping[str, Any], lr_factor: float) -> tuple[Any, Any, Any]:
        """One training step through the compiled whole step (:func:`capture_options`: on a GPU a CUDA graph
        replayed, one launch per step); ``batch`` of a static shape (:func:`stack_batches` with ``width`` and
        ``size``: one graph per shape). Returns (losses, gradient norms, runs stopped at this step) as tensors."""
        import torch

        if self._captured is None:
            # a fresh cache per group: a process trains one group at a time, and each group's graphs (one per
            # width, MAX_WIDTHS) must stay within dynamo's recompile limit (8 per function), past which it would
            # fall back to eager without a word; the groups before this one keep none of theirs
            torch._dynamo.reset()
            self._captured = torch.compile(self._whole_step, fullgraph=True, dynamic=False,
                                           **capture_options(self.device.type))
        self.base.train(True)
        if self.device.type == "cuda":
            torch.compiler.cudagraph_mark_step_begin()  # the last step's outputs are this step's inputs
        factor = torch.tensor(float(lr_factor), dtype=torch.float64, device=self.device)
        (self.params, self.exp_avg, self.exp_avg_sq, self.steps, self.active, losses, norms,
         newly) = self._captured(self.params, self.buffers, self.exp_avg, self.exp_avg_sq, self.steps, self.active,
                                 dict(batch), factor)
        return losses, norms, newly

    def stop(self, k: int) -> None:
        """Run ``k`` stops here: its weights and optimizer state freeze (the others train on)."""
        self.active[k] = False

    # -- per run
    def state_dict(self, k: int) -> dict[str, Any]:
        """Run ``k``'s model weights and buffers (a state dict of the solo model)."""
        return {n: t[k].clone() for n, t in {**self.params, **self.buffers}.items()}

    def optimizer_state(self, k: int) -> dict[str, Any]:
        return {"exp_avg": {n: t[k].clone() for n, t in self.exp_avg.items()},
                "exp_avg_sq": {n: t[k].clone() for n, t in self.exp_avg_sq.items()},
                "step": int(self.steps[k])}

    def load_run(self, k: int, state: Mapping[str, Any]) -> None:
        """Put a checkpoint's weights and optimizer state (:data:`STATE_FILE`) into slot ``k``."""
        import torch

        with torch.no_grad():
            for n, t in state["model"].items():
                target = self.params if n in self.params else self.buffers
                if n in target:
                    target[n][k] = t
            for n, t in state["optimizer"]["exp_avg"].items():
                self.exp_avg[n][k] = t
            for n, t in state["optimizer"]["exp_avg_sq"].items():
                self.exp_avg_sq[n][k] = t
        self.steps[k] = int(state["optimizer"]["step"])


def _eager_attention(model: Any) -> None:
    """Eager attention (sdpa has no batching rule on CPU; eager attention vmaps)."""
    setter = getattr(model, "set_attn_implementation", None)
    if setter is not None:
        try:
            setter("eager")
            return
        except Exception:  # an older transformers: the config attribute
            pass
    model.config._attn_implementation = "eager"


# ---------------------------------------------------------------------- batches
def additive_mask(attention: Any, causal: bool, dtype: Any) -> Any:
    """The prepared 4-D mask ``[..., B, 1, W, W]`` from a 0/1 padding mask ``[..., B, W]``: 0 where a query may
    attend a key (a real key; with ``causal`` only keys at or before the query), the dtype's minimum elsewhere.

    >>> import torch
    >>> additive_mask(torch.tensor([[1, 1, 0]]), True, torch.float32)[0, 0].eq(0).int().tolist()
    [[1, 0, 0], [1, 1, 0], [1, 1, 0]]
    """
    import torch

    width = attention.shape[-1]
    allowed = attention.bool()[..., None, :].expand(*attention.shape[:-1], width, width)
    if causal:
        allowed = allowed & torch.ones(width, width, dtype=torch.bool, device=attention.device).tril()
    zero = torch.zeros((), dtype=dtype, device=attention.device)
    return torch.where(allowed, zero, torch.finfo(dtype).min).unsqueeze(-3)


def stack_batches(rows: Sequence[Sequence[Mapping[str, Any]]], pad_id: int, *, causal: bool,
                  dtype: Any = None, multiple: int = PAD_MULTIPLE, width: int | None = None,
                  size: int | None = None) -> dict[str, Any]:
    """K runs' batches (lists of tokenized examples) as ``[K, B, W]`` tensors padded to the widest example of
    the group rounded up to ``multiple``, the 4-D mask, each example's last real token and the labels.

    Static shapes (a captured step): ``width`` a fixed width (:func:`static_width`) and ``size`` a fixed number of
    rows; rows past a run's examples are padding, ``weight`` 0 (left out of the loss: :func:`classification_loss`),
    attending their own first token only (so no row of the mask is all masked). ``attention_mask`` stays the
    real tokens' (what the token accounting counts).

    >>> ex = {"input_ids": [5, 6, 7], "label": 1}
    >>> b = stack_batches([[ex]], 0, causal=False, width=8, size=2)
    >>> b["input_ids"].shape, b["weight"].tolist(), b["attention_mask"].sum().item(), b["last"].tolist()
    (torch.Size([1, 2, 8]), [[1.0, 0.0]], 3, [[2, 0]])
    """
    import torch

    dtype = dtype or torch.float32
    longest = max(len(ex["input_ids"]) for batch in rows for ex in batch)
    if width is None:
        width = -(-longest // multiple) * multiple
    elif longest > width:
        raise ValueError(f"an example of {longest} tokens does not fit the static width {width}")
    k, b = len(rows), size or max(len(batch) for batch in rows)
    ids = torch.full((k, b, width), pad_id, dtype=torch.long)
    attention = torch.zeros((k, b, width), dtype=torch.long)
    types = torch.zeros((k, b, width), dtype=torch.long) if "token_type_ids" in rows[0][0] else None
    regression = isinstance(rows[0][0]["label"], float)
    labels = torch.zeros((k, b), dtype=torch.float32 if regression else torch.long)
    weight = torch.zeros((k, b), dtype=torch.float32)
    for i, batch in enumerate(rows):
        for j, ex in enumerate(batch):
            n = len(ex["input_ids"])
            ids[i, j, :n] = torch.tensor(ex["input_ids"])
            attention[i, j, :n] = 1
            if types is not None:
                types[i, j, :n] = torch.tensor(ex["token_type_ids"])
            labels[i, j] = ex["label"]
            weight[i, j] = 1.0
    attend = attention.clone()
    attend[..., 0] = 1  # a padding row attends its first token: a row with every key masked would be NaN
    out = {"input_ids": ids, "mask": additive_mask(attend, causal, dtype), "last": attend.sum(-1) - 1,
           "labels": labels, "attention_mask": attention}
    if size is not None:
        out["weight"] = weight
    if types is not None:
        out["token_type_ids"] = types
    return out


class PaddedRows:
    """One run's tokenized examples padded once into tensors, so a step's batch is a gather, not a Python loop
    over examples (:func:`stack_batches` builds each step's batch example by example), and the 4-D mask, the
    batch's largest tensor (K x B x W x W), is built where the step runs instead of copied there: host time a
    launch-bound GPU waits for (``scripts/bench_fused_batches.py`` measures both ways). :meth:`batch` gives exactly
    what :func:`stack_batches` gives for the same picks (tests/test_fused.py, on random picks, widths and sizes).

    >>> rows = PaddedRows([{"input_ids": [5, 6, 7], "label": 1}, {"input_ids": [8], "label": 0}], pad_id=0)
    >>> b = rows.batch([[1, 0]], causal=False)
    >>> b["input_ids"].tolist(), b["last"].tolist()
    ([[[8, 0, 0, 0, 0, 0, 0, 0], [5, 6, 7, 0, 0, 0, 0, 0]]], [[0, 2]])
    """

    def __init__(self, rows: Sequence[Mapping[str, Any]], pad_id: int):
        import torch

        n = len(rows)
        self.lengths = torch.tensor([len(ex["input_ids"]) for ex in rows] + [0], dtype=torch.long)
        longest = int(self.lengths.max()) if n else 0
        self.ids = torch.full((n + 1, max(longest, 1)), pad_id, dtype=torch.long)  # row n: the padding row
        self.types = torch.zeros_like(self.ids) if rows and "token_type_ids" in rows[0] else None
        for i, ex in enumerate(rows):
            self.ids[i, :len(ex["input_ids"])] = torch.tensor(ex["input_ids"], dtype=torch.long)
            if self.types is not None:
                self.types[i, :len(ex["token_type_ids"])] = torch.tensor(ex["token_type_ids"], dtype=torch.long)
        regression = bool(rows) and isinstance(rows[0]["label"], float)
        self.labels = torch.tensor([ex["label"] for ex in rows] + [0],
                                   dtype=torch.float32 if regression else torch.long)
        self.pad = n

    def batch(self, picks: Sequence[Sequence[int]], *, causal: bool, dtype: Any = None,
              multiple: int = PAD_MULTIPLE, width: int | None = None, size: int | None = None,
              device: Any = None) -> dict[str, Any]:
        """:func:`stack_batches` of the examples at ``picks`` (one list of indices per run), by gathers, on
        ``device`` (the mask built there)."""
        import torch

        dtype = dtype or torch.float32
        k, b = len(picks), size or max(len(p) for p in picks)
        index = torch.full((k, b), self.pad, dtype=torch.long)
        for i, pick in enumerate(picks):
            index[i, :len(pick)] = torch.as_tensor(list(pick), dtype=torch.long)
        lengths = self.lengths[index]
        longest = int(lengths.max())
        if width is None:
            width = -(-longest // multiple) * multiple
        elif longest > width:
            raise ValueError(f"an example of {longest} tokens does not fit the static width {width}")
        cut = min(width, self.ids.shape[1])
        ids = torch.full((k, b, width), int(self.ids[self.pad, 0]), dtype=torch.long)
        ids[..., :cut] = self.ids[index][..., :cut]
        attention = (torch.arange(width) < lengths[..., None]).long()
        out = {"input_ids": ids, "labels": self.labels[index], "attention_mask": attention}
        if size is not None:
            out["weight"] = (index != self.pad).float()
        if self.types is not None:
            types = torch.zeros((k, b, width), dtype=torch.long)
            types[..., :cut] = self.types[index][..., :cut]
            out["token_type_ids"] = types
        if device is not None:
            out = {key: v.to(device, non_blocking=True) for key, v in out.items()}
        attend = out["attention_mask"].clone()
        attend[..., 0] = 1  # a padding row attends its first token (as stack_batches)
        out["mask"] = additive_mask(attend, causal, dtype)
        out["last"] = attend.sum(-1) - 1
        return out


#: at most this many static widths per run (a captured step keeps one graph per shape: torch.compile's
#: recompile limit is 8, and the last partial batch is filled to the batch size, so the widths are the shapes)
MAX_WIDTHS = 6


def static_width(longest: int, ceiling: int, widths: int = MAX_WIDTHS, multiple: int = PAD_MULTIPLE) -> int:
    """The static width of a batch whose widest example has ``longest`` tokens, where the run's widest has
    ``ceiling``: the next of at most ``widths`` evenly spaced widths (multiples of ``multiple``) up to it.

    >>> [static_width(n, 128) for n in (1, 24, 25, 100, 121, 128)]
    [24, 24, 48, 120, 128, 128]
    >>> sorted({static_width(n, 300) for n in range(1, 301)})
    [56, 112, 168, 224, 280, 304]
    """
    top = -(-ceiling // multiple) * multiple
    step = -(-ceiling // (widths * multiple)) * multiple
    return min(-(-longest // step) * step, top)


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """The Trainer's training order for ``epoch`` (accelerate's seedable sampler: a permutation of ``n`` drawn
    from a generator seeded ``seed + epoch``)."""
    import torch

    generator = torch.Generator()
    generator.manual_seed(seed + epoch)
    return torch.randperm(n, generator=generator).tolist()


def schedule_factor(step: int, total: int, warmup: int) -> float:
    """The linear schedule with warm-up (``get_linear_schedule_with_warmup``) at optimizer step ``step``."""
    if step < warmup:
        return step / max(1, warmup)
    return max(0.0, (total - step) / max(1, total - warmup))


def warmup_steps(ratio: float, total: int) -> int:
    """The Trainer's warm-up steps: a value below 1 is a share of the steps (rounded up)."""
    return int(ratio) if ratio >= 1 else math.ceil(total * ratio)


# ---------------------------------------------------------------------- the group's training
def train_group(stack: StackedRuns, train_rows: Sequence[Sequence[Mapping[str, Any]]], seeds: Sequence[int], *,
                batch_size: int, total_steps: int, warmup: int, pad_id: int, causal: bool, start_step: int = 0,
                dropout_seed: int = 0, on_step: Callable[[int, Any, list[float]], None] | None = None,
                on_epoch_end: Callable[[int, int], None] | None = None, capture: bool = False) -> dict[str, Any]:
    """Train the stacked runs from ``start_step`` to ``total_steps``: run k's examples ``train_rows[k]`` in its
    seed's order. ``on_step(step, batch, losses)`` after each optimizer step; ``on_epoch_end(step, epoch)`` at each
    epoch end and at the last step (evaluation and checkpoints). A run whose loss or gradient norm is not finite
    stops there (:meth:`StackedRuns.stop`). ``capture``: static-shape batches (:func:`static_width`, every batch
    filled to ``batch_size`` rows) through :meth:`StackedRuns.captured_step`. The next step's batch is built
    while the device computes this one (its orders drawn once an epoch). Returns ``{"losses": [[per-run loss] per
    step], "stopped": {k: step}}``."""
    import torch

    n = len(train_rows[0])
    ceiling = max(len(ex["input_ids"]) for rows_k in train_rows for ex in rows_k) if capture else 0
    padded: dict[int, PaddedRows] = {}  # one per distinct list of rows (a group's runs usually share one)
    sources = [padded.setdefault(id(rows_k), PaddedRows(rows_k, pad_id)) for rows_k in train_rows]
    per_epoch = -(-n // batch_size)
    losses_log: list[list[float]] = []
    stopped: dict[int, int] = {}
    orders: dict[int, list[list[int]]] = {}  # the epoch's orders, drawn once an epoch (not once a step)

    def make_batch(step: int) -> dict[str, Any]:
        epoch, within = divmod(step, per_epoch)
        if epoch not in orders:
            orders.clear()
            orders[epoch] = [epoch_order(n, seed, epoch) for seed in seeds]
        start = within * batch_size
        picks = [order[start:start + batch_size] for order in orders[epoch]]
        static = {}
        if capture:
            longest = max(int(src.lengths[pick].max()) for src, pick in zip(sources, picks))
            static = {"width": static_width(longest, ceiling), "size": batch_size}
        if len(padded) == 1:  # the usual group: every run draws from the same rows
            return sources[0].batch(picks, causal=causal, dtype=stack.dtype, device=stack.device, **static)
        return {k: v.to(stack.device) for k, v in stack_batches(
            [[train_rows[k][i] for i in pick] for k, pick in enumerate(picks)], pad_id, causal=causal,
            dtype=stack.dtype, **static).items()}

    step = start_step
    batch = make_batch(step) if step < total_steps else {}
    while step < total_steps:
        torch.manual_seed(dropout_seed * 1_000_003 + step)  # the group's dropout draws, per step
        model_batch = {k: v for k, v in batch.items() if k != "attention_mask"}
        factor = schedule_factor(step, total_steps, warmup)
        if capture:  # launched; the next batch is built on the host while the device computes this step
            losses, _, newly = stack.captured_step(model_batch, factor)
            upcoming = make_batch(step + 1) if step + 1 < total_steps else {}
            for k in newly.nonzero().flatten().tolist():
                stopped[k] = step + 1
        else:
            losses, grads = stack.loss_and_grads(model_batch)
            upcoming = make_batch(step + 1) if step + 1 < total_steps else {}
            norms = stack.grad_norms(grads)
            for k in range(stack.k):
                if stack.active[k] and not (torch.isfinite(losses[k]) and torch.isfinite(norms[k])):
                    stack.stop(k)
                    stopped[k] = step + 1
            stack.step(grads, factor, norms)
        step += 1
        step_losses = [float(x) for x in losses]
        losses_log.append(step_losses)
        if on_step is not None:
            on_step(step, batch, step_losses)
        if on_epoch_end is not None and (step % per_epoch == 0 or step == total_steps):
            on_epoch_end(step, -(-step // per_epoch))
        batch = upcoming
    return {"losses": losses_log, "stopped": stopped}


def capture_options(device: str) -> dict[str, Any]:
    """``torch.compile`` options of the captured step (:meth:`StackedRuns.captured_step`) on ``device``.

    On a GPU: inductor's ``reduce-overhead`` mode, which records each static shape's whole step as a CUDA graph
    and replays it (one launch per step instead of one per kernel: what a launch-bound run pays for). On a CPU
    there is no launch to save: the step is still captured whole (``fullgraph``, one graph per shape) and run by
    AOTAutograd with eager kernels, so the capture itself (static shapes, no graph break, state in and out) is
    exercised and compared with eager where the tests run; the calibration never chooses it there.

    >>> capture_options("cuda"), capture_options("cpu")
    ({'mode': 'reduce-overhead'}, {'backend': 'aot_eager'})
    """
    return {"mode": "reduce-overhead"} if device == "cuda" else {"backend": "aot_eager"}


def evaluate_group(stack: StackedRuns, rows: Sequence[Mapping[str, Any]], *, batch_size: int, pad_id: int,
                   causal: bool) -> tuple[Any, Any]:
    """(logits ``[K, N, labels]``, mean loss per run ``[K]``) on one shared evaluation set (the Trainer's
    eval loss: each batch's mean loss weighted by its size)."""
    import torch

    outs, total = [], torch.zeros(stack.k, dtype=torch.float64)
    for start in range(0, len(rows), batch_size):
        part = rows[start:start + batch_size]
        batch = stack_batches([part], pad_id, causal=causal, dtype=stack.dtype)
        shared = {k: v[0].to(stack.device) for k, v in batch.items() if k != "attention_mask"}
        logits = stack.logits(shared)
        outs.append(logits)
        labels = shared["labels"]
        for k in range(stack.k):
            total[k] += float(classification_loss(logits[k], labels, stack.regression)) * len(part)
    return torch.cat(outs, dim=1).cpu(), total / max(1, len(rows))


# ---------------------------------------------------------------------- energy of a fused group
#: what a fused run's record says about how its energy was attributed
SPLIT_METHOD = "fused group: one meter reading split by computed tokens"
_SPLIT_KEYS = ("energy_kwh", "gpu_hours", "co2_kg", "gpu_kwh_measured", "modelled_kwh")
_UNITS_PER_KWH = 3_600_000_000  # millijoules: the NVML counter's unit


def split_exactly(total: float, weights: Sequence[float], units: int = _UNITS_PER_KWH) -> list[float]:
    """``total`` split by ``weights`` in whole ``units`` (largest remainder), so the parts' units sum exactly to
    the total's; returned in the total's unit.

    >>> parts = split_exactly(1.0, [1, 1, 1], units=1000)
    >>> parts, round(sum(p * 1000 for p in parts))
    ([0.334, 0.333, 0.333], 1000)
    """
    whole = round(total * units)
    weight_sum = float(sum(weights))
    if weight_sum <= 0:
        weights, weight_sum = [1.0] * len(weights), float(len(weights))
    raw = [whole * w / weight_sum for w in weights]
    parts = [math.floor(r) for r in raw]
    left = whole - sum(parts)
    for i in sorted(range(len(raw)), key=lambda i: (parts[i] - raw[i], i))[:left]:
        parts[i] += 1
    return [p / units for p in parts]


def split_efficiency(reading: Mapping[str, Any], tokens: Mapping[str, int], group: str) -> dict[str, dict[str, Any]]:
    """One group's efficiency reading (an :class:`harness.energy.tracker.EfficiencyTracker` result) split
    between its runs by their computed tokens: energy (and each part), GPU-hours and carbon in whole millijoules
    (or their equivalents) summing exactly to the reading; durations are the group's (the runs ran together)."""
    names = list(tokens)
    weights = [float(tokens[n]) for n in names]
    out = {n: copy.deepcopy(dict(reading)) for n in names}
    for key in _SPLIT_KEYS:
        if isinstance(reading.get(key), (int, float)):
            for n, part in zip(names, split_exactly(float(reading[key]), weights)):
                out[n][key] = part
    for part_key, value in (reading.get("breakdown") or {}).items():
        for n, part in zip(names, split_exactly(float(value or 0.0), weights)):
            out[n]["breakdown"][part_key] = part
    total_tokens = sum(weights)
    for n, w in zip(names, weights):
        out[n]["fused_attribution"] = {
            "method": SPLIT_METHOD, "group": group, "runs": len(names),
            "computed_tokens": int(w), "group_computed_tokens": int(total_tokens),
            "share": w / total_tokens if total_tokens else 1 / len(names),
            "group_energy_kwh": reading.get("energy_kwh"), "group_gpu_hours": reading.get("gpu_hours"),
        }
    return out


# ---------------------------------------------------------------------- the group's runs end to end
def run_group(specs: Sequence[Any], output: Path, *, data_root: Path | None = None, progress: bool = False,
              calibration: Mapping[str, Any] | None = None, keep_checkpoints: bool = False,
              track_efficiency: bool = True, country_iso_code: str | None = None, region: str | None = None,
              measure_power_secs: float = 15.0, eval_batch_size: int | None = None,
              allow_nonfinite: bool = False, save_steps: int | None = None,
              on_step: Callable[[int, Any], None] | None = None, capture: str | None = None,
              **ignored: Any) -> dict[str, Any]:
    """Train ``specs`` (one cell's runs: :func:`fuse_groups`) as one fused group and store each run's record
    through its own lifecycle; returns ``{run_id: record}`` of the runs it stored or found done. A run another
    process holds is left to it. Options as :func:`harness.finetune.run_finetune`'s (``optim``, ``report_to``
    and ``dataloader_num_workers`` do not apply: the group has its own AdamW and reads its data in-process).
    ``capture``: what chose to capture the group's whole step (:meth:`StackedRuns.captured_step`; None: eager)."""
    import contextlib

    from harness.store import RunStore

    output = Path(output)
    store = RunStore(output)
    out: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        runs = []
        for spec in specs:
            run = stack.enter_context(store.run(spec))
            if run.state == "done":
                out[spec.run_id()] = run.record
            elif run.state == "run":
                runs.append(run)
        if runs:
            out.update(_train_runs(runs, output, data_root=data_root, calibration=calibration,
                                   track_efficiency=track_efficiency, eval_batch_size=eval_batch_size,
                                   tracker_kwargs={"country_iso_code": country_iso_code, "region": region,
                                                   "measure_power_secs": measure_power_secs},
                                   allow_nonfinite=allow_nonfinite, save_steps=save_steps, on_step=on_step,
                                   capture=capture))
    if not keep_checkpoints:
        for rid, record in out.items():
            if (record or {}).get("status") == "ok":
                store.remove_checkpoints(rid)
    return out


def _train_runs(runs: Sequence[Any], output: Path, *, data_root: Path | None, calibration: Mapping[str, Any] | None,
                track_efficiency: bool, eval_batch_size: int | None, tracker_kwargs: dict[str, Any],
                allow_nonfinite: bool, save_steps: int | None,
                on_step: Callable[[int, Any], None] | None, capture: str | None = None) -> dict[str, Any]:
    """The group's training, then each run's record (ok, diverged or failed) through its own attempt."""
    from harness.environment import environment_info
    from harness.finetune.tasks import get_task
    from harness.finetune.train import _NAMING, nonfinite_values

    specs = [r.spec for r in runs]
    group = group_id(specs)
    task = get_task(specs[0].task)
    bases = [{
        "task": task.name,
        "hyperparameters": {k: v for k, v in asdict(s).items() if k not in (*_NAMING, "model_args", "peft")},
        **({"model_args": dict(s.model_args)} if s.model_args else {}),
        "environment": environment_info(),
        "calibration": dict(calibration) if calibration else None,
    } for s in specs]
    try:
        results = _fit(specs, output, group, data_root=data_root, calibration=calibration,
                       tracker_kwargs=tracker_kwargs if track_efficiency else None,
                       eval_batch_size=eval_batch_size, save_steps=save_steps, on_step=on_step, capture=capture)
    except Exception as exc:  # the group failed as a whole (e.g. loading): every run's record says so
        for run, base in zip(runs, bases):
            run.fail(exc, base)
        raise
    out: dict[str, Any] = {}
    for run, base, result in zip(runs, bases, results):
        diverged = nonfinite_values(result)
        if result.get("stopped_at") is not None or (diverged and not allow_nonfinite):
            shown = ", ".join(f"{k}={v}" for k, v in list(diverged.items())[:6]) or "training loss"
            reason = f"the run diverged: non-finite {shown} (stopped alone at step {result.get('stopped_at')} " \
                     f"of fused group {group})"
            out[run.run_id] = run.finish({**base, **result}, error=reason)
        else:
            out[run.run_id] = run.finish({**base, **result})
    return out


def _fit(specs: Sequence[Any], output: Path, group: str, *, data_root: Path | None,
         calibration: Mapping[str, Any] | None, tracker_kwargs: dict[str, Any] | None,
         eval_batch_size: int | None, save_steps: int | None,
         on_step: Callable[[int, Any], None] | None, capture: str | None = None) -> list[dict[str, Any]]:
    """Load, train and evaluate the group; each run's training result (the record's body)."""
    import torch
    import transformers
    from transformers import Trainer

    from harness.finetune.tasks import get_task, load_task
    from harness.finetune.train import _eval_sets, _tokenize, runtime_settings
    from harness.models import load_model, resolve_model
    from harness.store import RunStore

    transformers.logging.set_verbosity_error()
    spec0 = specs[0]
    task = get_task(spec0.task)
    info = resolve_model(spec0.model, spec0.model_args)
    check_fusable(info.family)
    settings = runtime_settings(spec0.precision, None, calibration)
    if settings["precision"] != "fp32":
        log.info("fused group %s trains in fp32 (mixed precision is not fused yet)", group)
    store = RunStore(output)
    run_dirs = [store.checkpoint_dir(s.run_id()) for s in specs]
    start_step, resumes = _resume_points(run_dirs)
    data = load_task(task, data_root, max_train_samples=spec0.max_train_samples,
                     max_eval_samples=spec0.max_eval_samples)
    models, tokenizer = [], None
    if resumes and info.is_tiny:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(str(resumes[0]))  # the checkpoint's vocabulary, not retrained
    for spec in specs:
        model, tokenizer, _ = load_model(
            spec.model, "sequence_classification",
            texts=data.train.texts()[:2000] if info.is_tiny else None, num_labels=task.num_labels,
            problem_type=task.problem_type, seed=spec.seed, tokenizer=tokenizer, model_args=spec.model_args)
        models.append(model.to(settings["device"]))
    decay = set(Trainer.get_decay_parameter_names(None, models[0]))
    stack = StackedRuns(models, learning_rates=[s.learning_rate for s in specs],
                        weight_decays=[s.weight_decay for s in specs], regression=task.is_regression, decay=decay)
    for k, folder in enumerate(resumes):
        stack.load_run(k, torch.load(folder / STATE_FILE, weights_only=True, map_location=stack.device))
    train_ds = _tokenize(data.train, tokenizer, spec0.max_length)
    train_rows = list(train_ds)
    eval_arg, eval_keys = _eval_sets(data, tokenizer, spec0.max_length)
    eval_sets = eval_arg if isinstance(eval_arg, dict) else {"": eval_arg}
    eval_rows = {name: list(ds) for name, ds in eval_sets.items()}
    n, batch_size = len(train_rows), spec0.batch_size
    per_epoch = -(-n // batch_size)
    total = spec0.max_steps if spec0.max_steps else math.ceil(spec0.epochs * per_epoch)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    causal = info.family in LAST_TOKEN
    book = _Book(specs, run_dirs, resumes, tokenizer)
    tracker = _tracker(tracker_kwargs, output, group, settings, resumes)
    eval_bs = eval_batch_size or max(batch_size, 64)

    def on_train_step(step: int, batch: Any, losses: list[float]) -> None:
        book.count(batch, losses)
        if save_steps and step % save_steps == 0 and step % per_epoch and step != total:
            book.save(stack, step, tracker)
        if on_step is not None:
            on_step(step, batch, losses)
        book.clock = time.perf_counter()

    def on_epoch_end(step: int, epoch: int) -> None:
        metrics = _evaluate(stack, task, eval_rows, eval_keys, eval_bs, pad_id, causal)
        book.log_epoch(step, round(step / per_epoch, 4), metrics)
        book.save(stack, step, tracker)
        book.clock = time.perf_counter()

    if tracker is not None:
        tracker.start()
    book.clock = time.perf_counter()
    try:
        outcome = train_group(stack, [train_rows] * len(specs), [s.seed for s in specs], batch_size=batch_size,
                              total_steps=total, warmup=warmup_steps(spec0.warmup_ratio, total), pad_id=pad_id,
                              causal=causal, start_step=start_step, dropout_seed=spec0.seed,
                              on_step=on_train_step, on_epoch_end=on_epoch_end, capture=capture is not None)
    finally:
        reading = tracker.stop() if tracker is not None and tracker.started else None
    split = split_efficiency(reading, {s.run_id(): int(book.tokens[k]["computed_tokens"])
                                       for k, s in enumerate(specs)}, group) if reading is not None else {}
    settings.update({
        "batching": {"mode": "bucketed", "pad_to_multiple_of": PAD_MULTIPLE, "requested": spec0.padding,
                     "fused": "each step's batches padded to the group's widest example"} if capture is None else
                    {"mode": "static", "pad_to_multiple_of": PAD_MULTIPLE, "requested": spec0.padding,
                     "fused": f"static shapes for the captured step: at most {MAX_WIDTHS} widths, every batch "
                              f"filled to {batch_size} rows (weight-0 padding rows)"},
        "compile": False, "group_by_length": False, "eval_batch_size": eval_bs, "save_steps": save_steps,
        "dataloader_num_workers": 0, "n_gpu": int(settings["device"] == "cuda"), "report_to": [],
        "precision": "fp32", "optim": "fused adamw",
        **({"precision_source": f"fused group (trains in fp32; {settings['precision']} was chosen by "
                                f"{settings['precision_source']})"} if settings["precision"] != "fp32" else {}),
        "attention": "eager",
    })
    from harness.finetune.callbacks import tokens_section
    from harness.finetune.metrics import best_over_epochs
    from harness.finetune.train import history_from_log

    out = []
    for k, spec in enumerate(specs):
        names = task.metric_names()
        history = history_from_log(book.log_history[k], task, eval_keys)
        best, best_epoch = best_over_epochs(history, names)
        steps_done = int(stack.steps[k])
        out.append({
            "metrics": {n: history[-1].get(n) for n in names} if history else {n: None for n in names},
            "metrics_best": best, "metrics_best_epoch": best_epoch, "history": history,
            "efficiency": split.get(spec.run_id()),
            "tokens": tokens_section(book.tokens[k]),
            "settings": {**settings, "fused": {"group": group, "runs": [s.run_id() for s in specs],
                                               "position": k, "size": len(specs),
                                               "chosen_by": "calibration" if (calibration or {}).get("fuse")
                                               else "the grid's fuse setting",
                                               "capture": {"mode": "captured", "chosen_by": capture,
                                                           "how": capture_options(settings["device"])}
                                               if capture is not None else {"mode": "eager"}}},
            "train": {
                "global_step": steps_done if k in outcome["stopped"] else total,
                "epochs": round((steps_done if k in outcome["stopped"] else total) / per_epoch, 4),
                "train_loss": book.loss_sum[k] / max(1, total),
                "train_samples": len(data.train),
                "eval_samples": {("dev_matched" if s == "" else "dev_mismatched") if len(data.evals) > 1 else "dev":
                                 len(v) for s, v in data.evals.items()},
                "data_source": data.source,
                "model_parameters": int(sum(p[k].numel() for p in stack.params.values())),
            },
            "resumed_from": start_step or None,
            "stopped_at": outcome["stopped"].get(k),
        })
    return out


class _Book:
    """The per-run bookkeeping of a fused group: the log history (the Trainer's entries, so the record's history
    is read by the same :func:`harness.finetune.train.history_from_log`), loss sums and token counts, restored
    from each run's checkpoint on resume."""

    def __init__(self, specs: Sequence[Any], run_dirs: Sequence[Path], resumes: Sequence[Path], tokenizer: Any):
        from harness.finetune.callbacks import TokenAccountingCallback

        self.specs, self.run_dirs, self.tokenizer = specs, run_dirs, tokenizer
        previous = [_read_json(folder / TRAINER_STATE) for folder in resumes] or [{} for _ in specs]
        self.log_history = [list(p.get("log_history") or []) for p in previous]
        self.loss_sum = [float(p.get("vnr_loss_sum") or 0.0) for p in previous]
        self.since_log = [float(p.get("vnr_since_log") or 0.0) for p in previous]
        self.last_logged = int(previous[0].get("global_step") or 0)
        self.tokens = [{k: float(v) for k, v in (TokenAccountingCallback.read_checkpoint(f) or {}).items()}
                       for f in resumes] or [{} for _ in specs]
        for t in self.tokens:
            for key in ("samples", "real_tokens", "computed_tokens", "train_seconds"):
                t.setdefault(key, 0.0)
        self.clock = time.perf_counter()

    def count(self, batch: Any, losses: list[float]) -> None:
        seconds = time.perf_counter() - self.clock
        real = batch["attention_mask"].sum(dim=(1, 2)).tolist()
        computed = int(batch["attention_mask"][0].numel())
        for k, t in enumerate(self.tokens):
            t["samples"] += int(batch["attention_mask"].shape[1])
            t["real_tokens"] += int(real[k])
            t["computed_tokens"] += computed
            t["train_seconds"] += seconds / len(self.tokens)
            self.loss_sum[k] += losses[k]
            self.since_log[k] += losses[k]

    def log_epoch(self, step: int, epoch: float, metrics: Sequence[dict[str, Any]]) -> None:
        for k in range(len(self.specs)):
            self.log_history[k].append({"loss": self.since_log[k] / max(1, step - self.last_logged),
                                        "step": step, "epoch": epoch})
            self.log_history[k].append({**metrics[k], "step": step, "epoch": epoch})
            self.since_log[k] = 0.0
        self.last_logged = step

    def save(self, stack: StackedRuns, step: int, tracker: Any) -> None:
        """Each run's checkpoint at ``step``: its weights and optimizer state, the log, the token counts and the
        group's efficiency so far, then the completion marker; the two latest are kept."""
        import shutil

        import torch

        from harness.energy.tracker import CHECKPOINT_FILE
        from harness.finetune.callbacks import TOKENS_FILE
        from harness.finetune.checkpoints import checkpoint_step, mark_complete
        from harness.store import atomic_write_json

        snapshot = tracker.snapshot() if tracker is not None and tracker.started else None
        for k, run_dir in enumerate(self.run_dirs):
            folder = run_dir / f"checkpoint-{step}"
            folder.mkdir(parents=True, exist_ok=True)
            torch.save({"model": stack.state_dict(k), "optimizer": stack.optimizer_state(k)}, folder / STATE_FILE)
            if self.tokenizer is not None:
                self.tokenizer.save_pretrained(str(folder))
            atomic_write_json(folder / TOKENS_FILE, dict(self.tokens[k]))
            if snapshot is not None:
                atomic_write_json(folder / CHECKPOINT_FILE, snapshot)
            atomic_write_json(folder / TRAINER_STATE, {
                "global_step": step, "log_history": self.log_history[k], "vnr_loss_sum": self.loss_sum[k],
                "vnr_since_log": self.since_log[k], "vnr_fused": True})
            mark_complete(folder, step)
            older = sorted((s, p) for p in run_dir.iterdir() if (s := checkpoint_step(p)) is not None and s < step)
            for _, stale in older[:-1]:
                shutil.rmtree(stale, ignore_errors=True)


def _read_json(path: Path) -> dict[str, Any]:
    from ranking.floor.json_io import read_json_object

    return read_json_object(path, allow_nan=True)


def _resume_points(run_dirs: Sequence[Path]) -> tuple[int, list[Path]]:
    """(step, each run's checkpoint folder at it): the latest step every run has a complete fused checkpoint of
    (a kill between two runs' saves leaves some one checkpoint behind: they all resume from the earlier one);
    (0, []) where some run has none."""
    from harness.finetune.checkpoints import checkpoint_step, is_complete_checkpoint

    common: set[int] | None = None
    for run_dir in run_dirs:
        steps = {s for p in (run_dir.iterdir() if run_dir.is_dir() else ())
                 if (s := checkpoint_step(p)) is not None and (p / STATE_FILE).is_file() and is_complete_checkpoint(p)}
        common = steps if common is None else common & steps
    if not common:
        return 0, []
    step = max(common)
    return step, [run_dir / f"checkpoint-{step}" for run_dir in run_dirs]


def _tracker(kwargs: dict[str, Any] | None, output: Path, group: str, settings: Mapping[str, Any],
             resumes: Sequence[Path]) -> Any:
    """One efficiency tracker for the group (one meter reading), in the GPU ledger under the group's name."""
    if kwargs is None:
        return None
    from harness.energy.tracker import EfficiencyTracker, read_checkpoint_efficiency

    cuda = settings["device"] == "cuda"
    return EfficiencyTracker(cuda_devices=[0] if cuda else [], ledger_dir=output / "energy", run_id=group,
                             previous=read_checkpoint_efficiency(resumes[0]) if resumes else None, **kwargs)


def _evaluate(stack: StackedRuns, task: Any, eval_rows: Mapping[str, list[Any]], eval_keys: Mapping[str, str],
              batch_size: int, pad_id: int, causal: bool) -> list[dict[str, Any]]:
    """Each run's evaluation entry (the Trainer's ``eval_[<set>_]<metric>`` keys) on every evaluation set."""
    import numpy as np

    from harness.finetune.metrics import compute_metrics, predictions_from_logits

    out: list[dict[str, Any]] = [{} for _ in range(stack.k)]
    for name, rows in eval_rows.items():
        started = time.perf_counter()
        logits, losses = evaluate_group(stack, rows, batch_size=batch_size, pad_id=pad_id, causal=causal)
        seconds = time.perf_counter() - started
        labels = np.asarray([r["label"] for r in rows])
        prefix = f"eval_{name}_" if name else "eval_"
        for k in range(stack.k):
            values = compute_metrics(task, predictions_from_logits(task, logits[k].numpy()), labels)
            out[k].update({f"{prefix}{m}": (float("nan") if v is None else v) for m, v in values.items()})
            out[k][f"{prefix}loss"] = float(losses[k])
            out[k][f"{prefix}runtime"] = seconds
    del eval_keys
    return out


# ---------------------------------------------------------------------- the executor's entry
def run_fused_group(specs: Sequence[Any], output: str | Path, *, data_root: Path | None = None,
                    options: Mapping[str, Any] | None = None) -> list[tuple[str, str, float, str | None]]:
    """One fused group for :func:`harness.grid.local.execute`: per run, in the order of ``specs``, ``(run id,
    status, seconds, error)`` with status ``ran``, ``skipped`` (done before), ``failed`` (the record's error) or
    ``busy`` (held by another process)."""
    from harness.store import RunStore

    store = RunStore(output)
    done = {s.run_id() for s in specs if store.is_done(s)}
    started = time.time()
    records: dict[str, Any] = {}
    error = None
    try:
        records = run_group(specs, Path(output), data_root=data_root, **dict(options or {}))
    except Exception as exc:  # the group failed as a whole: each run's record says why
        error = f"{type(exc).__name__}: {exc}"
        log.debug("fused group %s failed: %s", group_id(specs), error)
    seconds = time.time() - started
    out: list[tuple[str, str, float, str | None]] = []
    for spec in specs:
        rid = spec.run_id()
        record = records.get(rid) or store.get(rid)
        if rid in done:
            out.append((rid, "skipped", 0.0, None))
        elif rid in records and (record or {}).get("status") == "ok":
            out.append((rid, "ran", seconds, None))
        elif rid in records or error is not None:
            out.append((rid, "failed", seconds, str((record or {}).get("error") or error)))
        else:
            out.append((rid, "busy", 0.0, None))
    return out


# ---------------------------------------------------------------------- a calibration burst
class _Cut(Exception):
    """A fused burst reached the calibration's deadline."""


def measure_fused_burst(spec: Any, k: int, *, warmup: int, steps: int, windows: int,
                        data_root: Path | None = None, deadline: float | None = None,
                        capture: bool = False) -> dict[str, Any]:
    """One calibration burst of ``k`` fused runs of ``spec`` (seeds ``spec.seed`` … ``spec.seed + k - 1``) in this
    process: ``warmup`` untimed steps, then ``windows`` timed windows of ``steps`` steps; the row
    :mod:`harness.grid.calibrate` keeps (``samples_s``: the median window's samples of all ``k`` runs per
    second). Past ``deadline`` (a ``time.time()``) the burst stops and its row is ``cut`` (discarded).
    ``capture``: through the captured step (its compile and graph recording fall in the untimed warm-up: the
    row's ``wall_s`` beyond its timed ``seconds``, which :func:`harness.grid.calibrate.measure_capture` weighs)."""
    import resource

    import torch
    from transformers import Trainer

    from harness.finetune.tasks import get_task, load_task
    from harness.finetune.train import TINY_TOKENIZER_TEXTS, _tokenize
    from harness.models import load_model, resolve_model

    started = time.time()
    task = get_task(spec.task)
    info = resolve_model(spec.model, spec.model_args)
    check_fusable(info.family)
    total = warmup + windows * steps
    data = load_task(task, data_root, max_train_samples=total * spec.batch_size)
    models, tokenizer = [], None
    for i in range(k):
        model, tokenizer, _ = load_model(
            spec.model, "sequence_classification",
            texts=data.train.texts()[:TINY_TOKENIZER_TEXTS] if info.is_tiny else None, num_labels=task.num_labels,
            problem_type=task.problem_type, seed=spec.seed + i, tokenizer=tokenizer, model_args=spec.model_args)
        models.append(model.to("cuda") if torch.cuda.is_available() else model)
    stack = StackedRuns(models, learning_rates=[spec.learning_rate] * k, weight_decays=[spec.weight_decay] * k,
                        regression=task.is_regression, decay=set(Trainer.get_decay_parameter_names(None, models[0])))
    del models
    rows = list(_tokenize(data.train, tokenizer, spec.max_length))
    marks: list[float] = []
    losses: list[list[float]] = []

    def sync() -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()

    def on_step(step: int, batch: Any, step_losses: list[float]) -> None:
        if step >= warmup and (step - warmup) % steps == 0:
            sync()
            marks.append(time.perf_counter())
        if step > warmup:
            losses.append([step, step_losses[0]])
        if deadline is not None and time.time() > deadline:
            raise _Cut

    base = {"n": 1, "fuse": k, "precision": "fp32", "threads_per_run": torch.get_num_threads(),
            **({"capture": "on"} if capture else {})}
    try:
        train_group(stack, [rows] * k, [spec.seed + i for i in range(k)], batch_size=spec.batch_size,
                    total_steps=total, warmup=0, pad_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None
                    else 0, causal=info.family in LAST_TOKEN, dropout_seed=spec.seed, on_step=on_step,
                    capture=capture)
    except _Cut:
        return {**base, "status": "cut", "cut": True, "samples_s": None,
                "reason": f"budget: cut after {time.time() - started:.0f} s: discarded"}
    finally:  # the burst ran in the grid's own process: its memory goes back before the runs start
        del stack
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    rates = [k * steps * spec.batch_size / (b - a) for a, b in zip(marks, marks[1:])]
    if torch.cuda.is_available():
        peak = int(torch.cuda.max_memory_reserved())
    else:
        peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024
    import statistics

    return {**base, "status": "measured", "samples_s": statistics.median(rates), "window_samples_s": rates,
            "seconds": marks[-1] - marks[0], "wall_s": time.time() - started, "peak_memory_bytes": peak,
            "losses": losses[::max(1, steps // 4)]}
