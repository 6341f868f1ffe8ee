"""Parameter-efficient fine-tuning: LoRA adapters (the ``peft`` library) on a sequence classifier.

A run asks for it with ``FinetuneSpec.peft`` (``--peft lora`` / ``--peft-args``, ``peft:`` in a grid's
hyper-parameters, ``peft=`` in :func:`harness.finetune`). :func:`parse_peft` is its one validation point
(the settings are the declared fields of :class:`LoraSettings`): it fills the defaults and returns sorted pairs, so ``--peft lora`` and
``peft={"method": "lora", "r": 8}`` are the same run id. An empty setting is full fine-tuning.

Which linear layers get adapters (``target_modules``) defaults per family, keyed by the config's
``model_type``: peft's own table (``TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING``), and for the
families peft does not know, :data:`TARGET_MODULES` (the attention query and value projections, as in the
LoRA paper); a family without a default is refused unless ``target_modules`` is given. Every module of the
classifier outside its base model (``classifier``, ``score``, DistilBERT's ``pre_classifier``, DeBERTa's
``pooler``: :func:`head_modules`) stays fully trainable. The base model's weights never change.

>>> parse_peft("lora")
(('alpha', 16.0), ('dropout', 0.1), ('method', 'lora'), ('r', 8))
>>> dict(parse_peft("method=lora,r=4,target_modules=query+value"))["target_modules"]
('query', 'value')
>>> parse_peft("none")
()
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Annotated, Any, Literal

from ranking.floor.errors import UserError
from ranking.floor.schema import Count, Help, Number, PositiveFloat, validate

__all__ = ["LORA_DEFAULTS", "PEFT_METHODS", "TARGET_MODULES", "apply_peft", "default_target_modules", "head_modules",
           "parse_peft", "target_modules"]


PEFT_METHODS = ("lora",)
_PEFT_OFF = ("", "none", "full")


@dataclass(frozen=True)
class LoraSettings:
    """LoRA's settings (checked by the floor's schema core, :mod:`ranking.floor.schema`; the defaults are the LoRA paper's common choice)."""

    method: Annotated[Literal[PEFT_METHODS], Help("the PEFT method: lora")] = "lora"
    r: Annotated[Count, Help("rank of the adapters")] = 8
    alpha: Annotated[PositiveFloat, Help("scaling numerator (the update is scaled by alpha / r)")] = 16.0
    dropout: Annotated[float, Number(ge=0.0, lt=1.0), Help("dropout on the adapters' input, 0 to <1")] = 0.1
    target_modules: Annotated[tuple[str, ...] | None, Help("linear layers that get adapters (default per "
                                                           "model_type: TARGET_MODULES)")] = None


LORA_DEFAULTS: dict[str, Any] = {k: v for k, v in asdict(LoraSettings()).items() if k not in ("method", "target_modules")}
PEFT_KEYS = tuple(LoraSettings.__dataclass_fields__)


def parse_peft(value: Any, where: str | None = "peft") -> tuple[tuple[str, Any], ...]:
    """A PEFT setting as sorted ``(key, value)`` pairs with the defaults filled in (``()``: full fine-tuning).

    ``value`` is a method name (``"lora"``), ``"key=value,..."`` text (``target_modules`` joined by ``+``),
    a mapping or pairs (a spec's own form, also after a JSON round trip). ``None``, ``""``, ``"none"``
    mean full fine-tuning. The values are checked by :class:`LoraSettings`' declarations.

    >>> parse_peft({"method": "lora", "r": "16", "alpha": 32, "target_modules": ["v_proj", "q_proj"]})[-1]
    ('target_modules', ('q_proj', 'v_proj'))
    >>> parse_peft([]), parse_peft("none")
    ((), ())
    >>> parse_peft({"r": 0})
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: peft: r: 0 is below 1
    """
    if value is None or (isinstance(value, str) and value.strip().lower() in _PEFT_OFF):
        return ()
    if isinstance(value, (tuple, list)) and not value:  # no pairs: a spec's own "off", also after JSON ([])
        return ()
    items = _items(value, where or "")
    if isinstance(items.get("method"), str):
        items["method"] = items["method"].strip().lower()
    if items.get("target_modules") is not None:
        items["target_modules"] = _module_names(items["target_modules"], f"{where}: target_modules" if where else "target_modules")
    settings = validate(LoraSettings, items, where=where)
    out = {k: v for k, v in asdict(settings).items() if v is not None}
    out["alpha"] = float(out["alpha"])
    return tuple(sorted(out.items()))


def _items(value: Any, where: str) -> dict[str, Any]:
    """``value`` as a mapping: a method name, ``k=v,...`` text, a mapping or pairs."""
    if isinstance(value, str):
        text = value.strip()
        if "=" not in text:
            return {"method": text}
        out: dict[str, Any] = {}
        for item in (p.strip() for p in text.split(",")):
            key, sep, val = item.partition("=")
            if not sep or not key.strip():
                raise UserError(f"{where + ': ' if where else ''}{item!r} is not key=value (e.g. r=8,alpha=16,target_modules=query+value)")
            if key.strip() in out:
                raise UserError(f"{where + ': ' if where else ''}{key.strip()!r} is given twice "
                                f"({key.strip()}={out[key.strip()]} and {key.strip()}={val.strip()}): give it once")
            out[key.strip()] = val.strip()
        return out
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items()}
    try:
        pairs = [(str(k), v) for k, v in value]
    except (TypeError, ValueError):
        raise UserError(f"{where + ': ' if where else ''}give a method (lora) or a mapping of {', '.join(PEFT_KEYS)}") from None
    seen: dict[str, Any] = {}
    for key, val in pairs:
        if key in seen:
            raise UserError(f"{where + ': ' if where else ''}{key!r} is given twice: give it once")
        seen[key] = val
    return seen


def _module_names(value: Any, where: str) -> tuple[str, ...]:
    """Module names from ``"q_proj+v_proj"`` or a list, sorted and without repeats."""
    names: Iterable[Any] = value.replace(",", "+").split("+") if isinstance(value, str) else value
    if isinstance(names, (bytes, Mapping)) or not isinstance(names, Iterable):
        raise UserError(f"{where}: give module names, e.g. [q_proj, v_proj]")
    out = tuple(sorted({str(n).strip() for n in names if str(n).strip()}))
    if not out:
        raise UserError(f"{where}: give at least one module name, e.g. [q_proj, v_proj]")
    return out


#: peft's own table of default LoRA targets per ``model_type`` (its name in peft >= 0.4; looked up lazily)
PEFT_TARGETS_TABLE = "TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING"

# model_type -> the linear layers LoRA adapts by default (query and value projections of attention), for the
# families peft's own table (:func:`peft_target_modules`) does not know; peft's entry wins where it has one (e.g.
# phi: peft adds fc1 and fc2). Families peft knows today stay listed for an older peft (>= 0.13) that lacks them.
TARGET_MODULES: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("bert", "roberta", "xlm-roberta", "camembert", "electra", "albert"), ("query", "value")),
    "deberta": ("in_proj",),  # DeBERTa (v1) projects query, key and value in one layer
    "deberta-v2": ("query_proj", "value_proj"),
    "distilbert": ("q_lin", "v_lin"),
    "modernbert": ("Wqkv",),
    "gpt2": ("c_attn",),  # one Conv1D for query, key and value
    **dict.fromkeys(("gpt_neox", "falcon", "bloom"), ("query_key_value",)),
    **dict.fromkeys(("llama", "mistral", "mixtral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "olmo",
                     "olmo2", "opt", "gpt_neo", "gptj", "phi", "smollm3", "granite"), ("q_proj", "v_proj")),
    "phi3": ("qkv_proj",),  # Phi-3 fuses the query, key and value projections
}


#: families whose default targets stay ours although peft's table differs: the default is not part of a run's id,
#: so taking peft's (phi: q_proj, v_proj, fc1, fc2) would reuse LoRA results stored under ours as if done.
KEPT_FOR_STORED_RUNS = frozenset({"phi"})


def peft_target_modules() -> Mapping[str, Any]:
    """peft's table of default LoRA target modules per ``model_type`` (empty when peft is not installed)."""
    try:
        from peft.utils import constants
    except ImportError:
        return {}
    return getattr(constants, PEFT_TARGETS_TABLE, None) or {}


def default_target_modules(family: str) -> tuple[tuple[str, ...], str] | None:
    """The default ``target_modules`` of a ``model_type`` and where they come from (peft's table, else
    :data:`TARGET_MODULES`), or ``None`` when neither knows the family.

    >>> default_target_modules("stablelm")
    (('q_proj', 'v_proj'), "peft's default for stablelm")
    >>> default_target_modules("distilbert")
    (('q_lin', 'v_lin'), 'default for distilbert')
    >>> default_target_modules("phi")
    (('q_proj', 'v_proj'), 'default for phi (kept: stored runs used it)')
    """
    theirs = peft_target_modules().get(family)
    if family in KEPT_FOR_STORED_RUNS:
        return TARGET_MODULES[family], f"default for {family} (kept: stored runs used it)"
    if theirs:
        return tuple(str(m) for m in theirs), f"peft's default for {family}"
    if family in TARGET_MODULES:
        return TARGET_MODULES[family], f"default for {family}"
    return None


def target_modules(settings: Mapping[str, Any], family: str, model: str) -> tuple[str, ...]:
    """The modules that get adapters: the setting's ``target_modules``, else the family's default
    (:func:`default_target_modules`: peft's table, else :data:`TARGET_MODULES`).

    >>> target_modules({"method": "lora"}, "llama", "m")
    ('q_proj', 'v_proj')
    >>> target_modules({"method": "lora"}, "t5x", "m")
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: peft: no default target_modules for m (model_type t5x): give them, e.g. --peft-args target_modules=q_proj+v_proj
    """
    given = settings.get("target_modules")
    if given:
        return tuple(given)
    default = default_target_modules(family)
    if default is None:
        raise UserError(f"peft: no default target_modules for {model} (model_type {family}): give them, "
                        "e.g. --peft-args target_modules=q_proj+v_proj")
    return default[0]


def check_peft_available() -> None:
    """A one-line error when the ``peft`` package is missing."""
    import importlib.util

    if importlib.util.find_spec("peft") is None:
        raise UserError("peft is not installed: pip install 'peft>=0.13' (or run without --peft)")


def head_modules(model: Any) -> list[str]:
    """The classifier's modules outside its base model that hold weights (they stay fully trainable).

    BERT: ``classifier``; DistilBERT: ``pre_classifier``, ``classifier``; DeBERTa: ``pooler``,
    ``classifier``; GPT-2 and Llama-style decoders: ``score``.
    """
    base = getattr(model, "base_model_prefix", "")
    return [name for name, child in model.named_children()
            if name != base and next(child.parameters(), None) is not None]


def check_targets_exist(model: Any, targets: tuple[str, ...], name: str) -> None:
    """Refuse a ``target_modules`` name that no layer of ``model`` has, naming the linear layers it does have."""
    import torch

    leaves = {n.rsplit(".", 1)[-1]: m for n, m in model.named_modules() if n}
    missing = [t for t in targets if t not in leaves]
    if missing:
        linear = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules()
                         if isinstance(m, torch.nn.Linear) or type(m).__name__ == "Conv1D"})
        raise UserError(f"peft: {name} has no layer named {missing[0]!r} (target_modules); its linear layers: "
                        f"{', '.join(linear[:12])}")


def apply_peft(model: Any, settings: Mapping[str, Any], family: str, name: str) -> tuple[Any, dict[str, Any]]:
    """``model`` wrapped with the ``settings``' adapters, and what the record says about them.

    Only the adapters and :func:`head_modules` are trainable; the record names the method, its settings,
    the adapted and fully trained modules, and the trainable and total parameter counts.
    """
    check_peft_available()
    import peft

    targets = target_modules(settings, family, name)
    check_targets_exist(model, targets, name)
    heads = head_modules(model)
    config = peft.LoraConfig(task_type=peft.TaskType.SEQ_CLS, r=int(settings["r"]), lora_alpha=settings["alpha"],
                             lora_dropout=settings["dropout"], target_modules=list(targets),
                             modules_to_save=list(heads))
    try:
        wrapped = peft.get_peft_model(model, config)
    except ValueError as exc:  # e.g. a target module the model does not have
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"peft: {name}: target_modules {'+'.join(targets)}: {first[:300]}") from None
    trainable = sum(p.numel() for p in wrapped.parameters() if p.requires_grad)
    # The base model with its head, plus the adapters (not the frozen copy peft keeps of each trained head).
    total = sum(p.numel() for n, p in wrapped.named_parameters() if ".original_module." not in n)
    return wrapped, {
        "method": settings["method"],
        "r": int(settings["r"]),
        "alpha": float(settings["alpha"]),
        "dropout": float(settings["dropout"]),
        "target_modules": list(targets),
        "target_modules_source": "given" if settings.get("target_modules") else (
            default_target_modules(family) or ((), f"default for {family}"))[1],
        "modules_to_save": heads,
        "trainable_parameters": int(trainable),
        "total_parameters": int(total),
        "peft_version": peft.__version__,
    }
