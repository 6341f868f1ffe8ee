"""Models: any hub id or local checkpoint directory, the paper's models as short aliases, and ``tiny:<family>``.

A model is named three ways and every name resolves through :func:`resolve_model`:

* a **short alias** of the paper's models (``bert-base-uncased``, ``roberta-base``, ...); its hub id
  (``FacebookAI/roberta-base``) is the same model and gives the same run id;
* **any hub id** (``bert-large-cased``, ``google/electra-small-discriminator``, ``distilgpt2``) or a
  **local checkpoint directory** (``./my_checkpoint``, ``/abs/path``; anything with a path separator
  that exists, or starting with ``./``, ``../``, ``/`` or ``~``): its family and LM kind come from its
  own config (``AutoConfig``: ``model_type``, ``is_decoder``, ``is_encoder_decoder``, ``architectures``);
* ``tiny:<family>`` (bert, roberta, albert, deberta, distilbert, electra, gpt2): a small randomly initialised
  model of that family built from its config, with a tokenizer trained on the caller's text (WordPiece
  for the BERT-like families, byte-level BPE for RoBERTa and GPT-2); after that it goes through exactly
  the same code as a hub model. Nothing here touches the network unless a hub id is given.

``model_args`` (``--model-args revision=...,dtype=bfloat16``; ``model_args:`` in configs) go to
``from_pretrained``: see :data:`MODEL_ARGS` and :func:`parse_model_args`. They are part of the run id.

Family quirks are keyed by ``model_type`` (:data:`QUIRKS`), never by a model's name:

* no pad token (GPT-2 style): the tokenizer pads with EOS and the model's ``pad_token_id`` is set to it
  (needed for batched classification, where the last non-pad token is pooled);
* byte-level BPE (RoBERTa, GPT-2): words are tokenised after a space, so a continuation gets one;
* DeBERTa ships no trained MLM head on the hub: masked-LM scoring warns (the paper's released DeBERTa
  bias numbers share the caveat). Any other checkpoint without a trained MLM head (a bare ``BertModel``,
  an ELECTRA discriminator) is refused for masked scoring before any work;
* encoder-decoder models (T5, BART, ...) are refused up front: neither head this harness uses applies;
* a next-sentence-prediction head (BERT; StereoSet intersentence) is used only where the checkpoint ships
  it trained (:func:`load_next_sentence_model` checks the loading info), never a random one.

Errors (a typo'd id, a gated or private repo, weights missing offline, a directory without
``config.json``, corrupted weights) are :class:`ModelError`, a :class:`~ranking.floor.errors.UserError`: one
line naming the model and what to do.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.store import RunNotStarted
from ranking.floor.errors import UserError
from ranking.floor.json_io import JsonProblem, parse_json, read_json
from ranking.floor.schema import show

log = logging.getLogger(__name__)

HEADS = ("sequence_classification", "masked_lm", "causal_lm", "next_sentence")


class ModelError(RunNotStarted):
    """A model that cannot be resolved or loaded: bad name, missing offline, gated, corrupted, wrong head."""


@dataclass(frozen=True)
class ModelInfo:
    name: str  # canonical name: what results are keyed by (alias, hub id, absolute path or tiny:<family>)
    hub_id: str | None  # where from_pretrained loads it: a hub id or the absolute directory; None for tiny models
    family: str  # the config's model_type (bert, roberta, electra, gpt2, ...)
    lm_kind: str | None  # masked | causal | None (no LM head at all: fine-tuning only)
    local: bool = False  # a local checkpoint directory
    mlm_head: str = "trained"  # trained | untrained (the checkpoint ships none) | none (no MLM class)
    model_args: tuple[tuple[str, Any], ...] = ()

    @property
    def is_tiny(self) -> bool:
        return self.hub_id is None

    @property
    def quirks(self) -> dict[str, Any]:
        return QUIRKS.get(self.family, {})


@dataclass(frozen=True)
class _Known:
    hub_id: str
    family: str
    lm_kind: str
    mlm_head: str = "trained"


# The paper's models (plus gpt2-medium): short alias -> hub id. Their family is known without any download.
REGISTRY: dict[str, _Known] = {
    "bert-base-uncased": _Known("bert-base-uncased", "bert", "masked"),
    "roberta-base": _Known("FacebookAI/roberta-base", "roberta", "masked"),
    "albert-base-v2": _Known("albert/albert-base-v2", "albert", "masked"),
    "microsoft/deberta-base": _Known("microsoft/deberta-base", "deberta", "masked", "untrained"),
    "distilbert-base-uncased": _Known("distilbert/distilbert-base-uncased", "distilbert", "masked"),
    "distilroberta-base": _Known("distilbert/distilroberta-base", "roberta", "masked"),
    # The authors' released results use gpt2; their paper text says gpt2-medium.
    "gpt2": _Known("openai-community/gpt2", "gpt2", "causal"),
    "gpt2-medium": _Known("openai-community/gpt2-medium", "gpt2", "causal"),
}
ALIASES = {"deberta-base": "microsoft/deberta-base", "bert-base": "bert-base-uncased",
           "google-bert/bert-base-uncased": "bert-base-uncased",
           **{k.hub_id: alias for alias, k in REGISTRY.items() if k.hub_id != alias}}
TINY_PREFIX = "tiny:"
_FAMILY_KIND = {"bert": "masked", "roberta": "masked", "albert": "masked", "deberta": "masked",
                "distilbert": "masked", "electra": "masked", "gpt2": "causal"}

# Family quirks keyed by the config's model_type.
QUIRKS: dict[str, dict[str, Any]] = {
    "gpt2": {"pad_with_eos": True, "byte_level_bpe": True},
    "gpt_neo": {"pad_with_eos": True, "byte_level_bpe": True},
    "gpt_neox": {"pad_with_eos": True, "byte_level_bpe": True},
    "gptj": {"pad_with_eos": True, "byte_level_bpe": True},
    "opt": {"byte_level_bpe": True},
    "llama": {"pad_with_eos": True},
    "mistral": {"pad_with_eos": True},
    "qwen2": {"pad_with_eos": True},
    # position ids start after the padding index (pad_token_id + 1): max_position_embeddings 514 holds 512 tokens
    "roberta": {"byte_level_bpe": True, "positions_after_padding_idx": True},
    "xlm-roberta": {"positions_after_padding_idx": True},
    "camembert": {"positions_after_padding_idx": True},
    "deberta": {"untrained_mlm_head": "warn"},
    "deberta-v2": {"untrained_mlm_head": "warn"},
    "electra": {"pretraining_head_is_not_mlm": True},  # ElectraForPreTraining is the discriminator
}

# model_args accepted by --model-args / configs' model_args: -> how a value is checked.
MODEL_ARGS = ("revision", "dtype", "attn_implementation", "trust_remote_code", "subfolder")
_ARG_ALIASES = {"torch_dtype": "dtype"}
_DTYPES = {"auto": "auto", "float32": "float32", "fp32": "float32", "float16": "float16", "fp16": "float16",
           "half": "float16", "bfloat16": "bfloat16", "bf16": "bfloat16"}
#: the model_args a tiny model honours (it is built from a config: no revision, subfolder or remote code)
TINY_MODEL_ARGS = ("attn_implementation", "dtype")
_TRUE, _FALSE = {"true", "1", "yes", "on"}, {"false", "0", "no", "off"}
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".h5", ".msgpack", ".ckpt")


# ---------------------------------------------------------------------- model_args
def add_model_arguments(parser: Any) -> None:
    """``--model`` and ``--model-args``: how every command that loads a model names it."""
    parser.add_argument("--model", required=True,
                        help="any hub id (bert-large-cased, FacebookAI/roberta-base), a local checkpoint directory "
                        "(./ckpt), a paper alias (bert-base-uncased, gpt2, ...) or tiny:<family>")
    parser.add_argument("--model-args", default="", metavar="K=V,...",
                        help="from_pretrained options, part of the run id: revision, dtype, attn_implementation, "
                        "trust_remote_code, subfolder (e.g. revision=main,dtype=bfloat16)")


def parse_model_args(text: str | Mapping[str, Any] | Iterable[Any] | None, where: str = "--model-args"
                     ) -> tuple[tuple[str, Any], ...]:
    """``"k=v,k2=v2"`` (or a mapping, or pairs) as a sorted tuple of checked ``(key, value)`` pairs.

    Values are canonical, so equal settings give equal run ids: ``dtype`` is one of float32, float16,
    bfloat16, auto (``bf16``/``fp16``/``fp32``/``torch_dtype=`` accepted); ``trust_remote_code`` a bool.

    >>> parse_model_args("revision=v1.0,dtype=bf16")
    (('dtype', 'bfloat16'), ('revision', 'v1.0'))
    >>> parse_model_args({"trust_remote_code": "yes"})
    (('trust_remote_code', True),)
    >>> parse_model_args("")
    ()
    """
    if text is None:
        return ()
    if isinstance(text, str):
        pairs: list[tuple[str, Any]] = []
        for item in (p.strip() for p in text.split(",")):
            if not item:
                continue
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise UserError(f"{where}: {item!r} is not key=value (e.g. revision=main,dtype=bfloat16)")
            pairs.append((key.strip(), value.strip()))
    elif isinstance(text, Mapping):
        pairs = list(text.items())
    else:
        try:
            pairs = [(k, v) for k, v in text]
        except (TypeError, ValueError):
            raise UserError(f"{where}: expected key=value pairs, not {text!r}") from None
    out: dict[str, Any] = {}
    for key, value in pairs:
        key = _ARG_ALIASES.get(str(key), str(key))
        if key not in MODEL_ARGS:
            raise UserError(f"{where}: unknown model argument {key!r} (allowed: {', '.join(MODEL_ARGS)})")
        if key in out:
            raise UserError(f"{where}: {key} given twice")
        out[key] = _check_arg(key, value, where)
    return tuple(sorted(out.items()))


def _check_arg(key: str, value: Any, where: str) -> Any:
    """One model argument's canonical value (what the run id hashes), or a one-line :class:`UserError`.

    Values are single scalars (``from_pretrained`` takes none of these as a mapping or list); text holds
    no control characters (a newline would enter the run id and the logs); ``subfolder`` is a relative
    path that stays inside the model folder; ``attn_implementation`` is one transformers accepts.
    """
    if not isinstance(value, str) and not (key == "trust_remote_code" and isinstance(value, bool)):
        shown = "null" if value is None else f"a {type(value).__name__} ({value!r})"
        wanted = "true or false" if key == "trust_remote_code" else "one text value (quote it in YAML)"
        raise UserError(f"{where}: {key} must be {wanted}, not {shown}")
    if isinstance(value, str) and _has_control_character(value):
        raise UserError(f"{where}: {key} {value!r} contains a control character (newline, tab, ...): "
                        "give it on one line without them")
    if key == "trust_remote_code":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE | _FALSE:
            return text in _TRUE
        raise UserError(f"{where}: trust_remote_code must be true or false, not {value!r}")
    text = str(value).strip()
    if key == "dtype":
        if text.lower().removeprefix("torch.") not in _DTYPES:
            raise UserError(f"{where}: dtype {value!r}: use one of float32, float16, bfloat16, auto")
        return _DTYPES[text.lower().removeprefix("torch.")]
    if not text:
        raise UserError(f"{where}: {key} needs a value")
    if key == "attn_implementation":
        accepted = attention_implementations()
        if text not in accepted:
            raise UserError(f"{where}: attn_implementation {text!r} is not one transformers accepts: use one of "
                            f"{', '.join(accepted)}")
    if key == "subfolder":
        return _check_subfolder(text, where)
    return text


def _has_control_character(text: str) -> bool:
    """True when ``text`` holds a control character (Unicode category Cc: newline, tab, NUL, DEL, ...).

    >>> _has_control_character("main"), _has_control_character("a\\nb"), _has_control_character("a\\x00")
    (False, True, True)
    """
    import unicodedata

    return any(unicodedata.category(c) == "Cc" for c in text)


def attention_implementations() -> tuple[str, ...]:
    """The ``attn_implementation`` values the installed transformers accepts: ``eager`` and its registered
    attention functions (sdpa, flash_attention_2/3, flex_attention, ...; read from the package, so a newer
    transformers' additions are accepted too)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    return tuple(dict.fromkeys(["eager", *ALL_ATTENTION_FUNCTIONS.valid_keys()]))


def _check_subfolder(text: str, where: str) -> str:
    """A relative path inside the model folder, in canonical form (``./a//b/`` → ``a/b``).

    >>> _check_subfolder("./encoder//", "x")
    'encoder'
    >>> _check_subfolder("../other", "x")
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: x: subfolder '../other' leaves the model folder: give a folder inside it (e.g. encoder)
    """
    from pathlib import PurePosixPath, PureWindowsPath

    if text.startswith(("/", "\\", "~")) or PureWindowsPath(text).drive:
        raise UserError(f"{where}: subfolder {text!r} is an absolute path: give a folder inside the model "
                        "folder (e.g. encoder)")
    parts = [p for p in PurePosixPath(text.replace("\\", "/")).parts if p != "."]
    if ".." in parts:
        raise UserError(f"{where}: subfolder {text!r} leaves the model folder: give a folder inside it (e.g. encoder)")
    if not parts:
        raise UserError(f"{where}: subfolder {text!r} is the model folder itself: leave subfolder out")
    return "/".join(parts)


def check_model_args(name: str, args: tuple[tuple[str, Any], ...]) -> None:
    """Refuse (offline, one line) model_args that the canonical model ``name`` would ignore.

    A tiny model is built from a config: only :data:`TINY_MODEL_ARGS` apply (and are honoured). A local
    folder has no revisions, and its ``subfolder`` must not lead outside it (through a link).

    >>> check_model_args("tiny:bert", (("dtype", "bfloat16"),))
    >>> check_model_args("tiny:bert", (("revision", "main"),))
    Traceback (most recent call last):
    ...
    harness.models.ModelError: model_args of tiny:bert: revision does not apply to a tiny model (built from a config, not loaded from a checkpoint); only attn_implementation, dtype apply
    """
    kwargs = dict(args)
    if name.startswith(TINY_PREFIX):
        ignored = [k for k in kwargs if k not in TINY_MODEL_ARGS]
        if ignored:
            raise ModelError(f"model_args of {name}: {ignored[0]} does not apply to a tiny model (built from a "
                             f"config, not loaded from a checkpoint); only {', '.join(TINY_MODEL_ARGS)} apply")
    elif is_local(name):
        if "revision" in kwargs:
            raise ModelError(f"model_args of {name}: revision applies to hub ids; a local folder has no revisions "
                             "(drop revision=, or point --model at the folder of the revision you want)")
        sub = kwargs.get("subfolder")
        if sub and not (Path(name) / sub).resolve().is_relative_to(Path(name).resolve()):
            raise ModelError(f"model_args of {name}: subfolder {sub!r} leads outside the model folder (a link): "
                             "give a folder inside it")


def _config_kwargs(args: Mapping[str, Any]) -> dict[str, Any]:
    return {k: args[k] for k in ("revision", "subfolder", "trust_remote_code") if k in args}


# ---------------------------------------------------------------------- names
def _looks_like_path(name: str) -> bool:
    """A directory name rather than a hub id: explicit path syntax, or an existing directory (as
    ``from_pretrained`` decides)."""
    if name.startswith(("./", "../", "/", "~", ".\\")) or name in (".", ".."):
        return True
    return Path(name).expanduser().is_dir() or name.count("/") > 1


#: The longest model name looked up: a folder path's limit on Linux (PATH_MAX); a hub id is far shorter.
MODEL_NAME_MAX = 4096


def canonical_model(name: str) -> str:
    """The name a model's results are keyed by, computed offline.

    An alias and its hub id are one name; a local directory is its absolute path.

    >>> canonical_model("FacebookAI/roberta-base")
    'roberta-base'
    >>> canonical_model("tiny:bert")
    'tiny:bert'
    """
    if not isinstance(name, str) or not name.strip():
        raise ModelError(f"model name must be a non-empty string, not {show(name)}")
    name = name.strip()
    if len(name) > MODEL_NAME_MAX or any(len(part.encode()) > 255 for part in name.split("/")):
        raise ModelError(f"model {show(name)} is {len(name)} characters long: no hub id (owner/name, at most 96 "
                         f"characters each) or folder path (at most {MODEL_NAME_MAX} characters, 255 bytes a part) is; "
                         "give a hub id or a checkpoint folder")
    if name.startswith(TINY_PREFIX):
        family = name[len(TINY_PREFIX):]
        if family not in _FAMILY_KIND:
            raise ModelError(
                f"unknown tiny model {show(name)}: use one of {', '.join(TINY_PREFIX + f for f in _FAMILY_KIND)}")
        return name
    if name in REGISTRY or name in ALIASES:
        return ALIASES.get(name, name)
    if _looks_like_path(name):
        return str(_local_dir(name))
    if not _HUB_ID.match(name):
        raise ModelError(f"model {show(name)} is neither a hub id (owner/name) nor an existing directory")
    return name


def _local_dir(name: str) -> Path:
    path = Path(name).expanduser()
    if not path.exists():
        raise ModelError(f"model directory {name} does not exist: give an existing checkpoint directory or a hub id")
    if not path.is_dir():
        raise ModelError(f"model {name} is a file: give its checkpoint directory (with config.json)")
    return path.resolve()


def is_local(name: str) -> bool:
    """True when the canonical ``name`` is a local checkpoint directory."""
    return os.path.isabs(name)


def local_fingerprint(directory: str | Path, subfolder: str | None = None) -> str:
    """A content fingerprint of a checkpoint directory: config.json's bytes + each weight file's
    name, size and modification time. A re-trained checkpoint at the same path gets a new one."""
    root = Path(directory) / (subfolder or "")
    h = hashlib.sha256()
    config = root / "config.json"
    with contextlib.suppress(OSError):
        h.update(config.read_bytes())
    if root.is_dir():
        for path in sorted(p for p in root.rglob("*") if p.is_file() and (p.name.endswith(_WEIGHT_SUFFIXES)
                                                                          or p.name.endswith(".index.json"))):
            st = path.stat()
            h.update(f"{path.relative_to(root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


# ---------------------------------------------------------------------- resolution
def resolve_model(name: str, model_args: Any = None) -> ModelInfo:
    """The :class:`ModelInfo` of ``name`` (alias, hub id, local directory or ``tiny:<family>``).

    The paper's aliases and tiny models resolve offline; any other model's config is read
    (``AutoConfig``, from the directory, the HF cache or the hub), with ``model_args``' revision,
    subfolder and trust_remote_code. Raises :class:`ModelError` with one line on any failure.
    """
    return _resolve(canonical_model(name), parse_model_args(model_args))


@functools.lru_cache(maxsize=256)
def _resolve(name: str, args: tuple[tuple[str, Any], ...]) -> ModelInfo:
    if name.startswith(TINY_PREFIX):
        family = name[len(TINY_PREFIX):]
        check_model_args(name, args)
        return ModelInfo(name, None, family, _FAMILY_KIND[family], model_args=args)
    if name in REGISTRY:
        k = REGISTRY[name]
        return ModelInfo(name, k.hub_id, k.family, k.lm_kind, mlm_head=k.mlm_head, model_args=args)
    kwargs = dict(args)
    local = is_local(name)
    if local:
        check_model_args(name, args)
        folder = Path(name) / kwargs.get("subfolder", "")
        if not (folder / "config.json").is_file():
            raise ModelError(f"model directory {folder} has no config.json: save the model with "
                             "save_pretrained(DIR) or point --model at the folder that holds config.json")
    config = load_config(name, args)
    family = str(getattr(config, "model_type", "") or "")
    if getattr(config, "is_encoder_decoder", False):
        raise ModelError(f"{name} is an encoder-decoder model ({family}): only encoder (masked-LM) and "
                         "decoder (causal-LM) models can be fine-tuned and bias-scored here")
    lm_kind, mlm_head = lm_kind_from_config(config)
    return ModelInfo(name, name, family, lm_kind, local=local, mlm_head=mlm_head, model_args=args)


def check_local_files(info: ModelInfo) -> None:
    """A local model folder holds what loading it needs: weights (:func:`check_weight_files`) and its own
    tokenizer files. Called before a run starts (and by the grid's config check), so a folder saved without
    them is named up front, not by a run that fails to load it."""
    if info.local:
        check_weight_files(Path(info.name) / dict(info.model_args).get("subfolder", ""))
        _check_tokenizer_files(info)
        check_tokenizer_files_fit(info)


def _is_weight_file(name: str) -> bool:
    return name.endswith((".safetensors", ".safetensors.index.json", ".bin.index.json")) or (
        name.startswith("pytorch_model") and name.endswith(".bin"))


def check_weight_files(folder: Path) -> None:
    """A local model folder holds weights, and each safetensors file is as long as its own header says.

    A folder without any weight file, or a safetensors file cut short (a copy or download that stopped), is a
    :class:`ModelError` naming the file, before any run starts. (A truncated ``.bin`` is found only when read.)
    """
    files = sorted(p for p in folder.iterdir() if p.is_file() and _is_weight_file(p.name))
    if not files:
        raise ModelError(f"model directory {folder} has no weight file (model.safetensors, pytorch_model.bin, or "
                         "their shards): save the model with save_pretrained(DIR)")
    for path in files:
        if path.name.endswith(".safetensors"):
            need, have = _safetensors_length(path), path.stat().st_size
            if need is None or have < need:
                raise ModelError(f"model weight file {path} is {'unreadable' if need is None else 'truncated'} "
                                 f"({have} bytes{'' if need is None else f', its header says {need}'}): re-save "
                                 "or re-download it")


def _safetensors_length(path: Path) -> int | None:
    """The byte length a safetensors file's header implies (8 + header + the end of the last tensor); None when
    the header cannot be read."""
    import struct

    try:
        with open(path, "rb") as fh:
            raw = fh.read(8)
            if len(raw) < 8:
                return None
            (size,) = struct.unpack("<Q", raw)
            if size > 100_000_000:
                return None
            header = parse_json(fh.read(size))
        ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):  # JsonProblem is a ValueError
        return None
    return 8 + size + max(ends, default=0)


# ---------------------------------------------------------------------- offline
HUB_PROBE_TIMEOUT_S = 3.0


def _env_true(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in _TRUE


@functools.lru_cache(maxsize=1)
def _hub_reachable() -> bool:
    """One TCP connect to the hub's endpoint (``HUB_PROBE_TIMEOUT_S``), once per process."""
    import socket
    from urllib.parse import urlparse

    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=HUB_PROBE_TIMEOUT_S).close()
        return True
    except OSError:
        return False


def hub_offline(*, announce: bool = True) -> bool:
    """True when the hub must not be contacted: ``HF_HUB_OFFLINE``/``TRANSFORMERS_OFFLINE`` is set, or the hub
    cannot be reached (then offline mode is switched on for this process and its children, so loading
    reads the cache at once instead of spending a minute in retries, and, with ``announce``, a warning
    says so)."""
    return offline_reason(announce=announce) is not None


def offline_reason(*, announce: bool = True) -> str | None:
    """Why the hub must not be contacted (see :func:`hub_offline`), in words, or None when it may be."""
    from huggingface_hub import constants

    reason = None
    if _env_true("HF_HUB_OFFLINE") or _env_true("TRANSFORMERS_OFFLINE") or constants.HF_HUB_OFFLINE:
        reason = "HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set"
    elif not _hub_reachable():
        reason = f"the hub cannot be reached: no connection within {HUB_PROBE_TIMEOUT_S:g} s"
        if announce:
            log.warning("the Hugging Face hub cannot be reached: working offline (from the local cache)")
    if reason is not None:
        constants.HF_HUB_OFFLINE = True
        os.environ["HF_HUB_OFFLINE"] = "1"
    return reason


def load_config(name: str, args: tuple[tuple[str, Any], ...] = ()) -> Any:
    """``AutoConfig`` of a hub id or local directory, failures as one-line :class:`ModelError`."""
    from transformers import AutoConfig

    if not is_local(name):
        hub_offline()
    with hub_errors(name):
        return AutoConfig.from_pretrained(name, **_config_kwargs(dict(args)))


@dataclass(frozen=True)
class ModelDimensions:
    """What bounds a run's settings: the hidden size (a LoRA rank above it adds nothing but memory) and the
    longest input in tokens the model's absolute position embeddings hold (``None``: no such table)."""

    hidden_size: int | None
    positions: int | None
    attention_dropout: float | None = None  # the attention probabilities' dropout in training (None: unknown)


#: A config's dropout on attention probabilities, by the names the families give it (BERT family, DistilBERT and
#: Llama-style, GPT-2).
ATTENTION_DROPOUT_KEYS = ("attention_probs_dropout_prob", "attention_dropout", "attn_pdrop")


def dimensions_from_config(config: Any, family: str) -> ModelDimensions:
    """:class:`ModelDimensions` of a config (``hidden_size``, GPT-2's ``n_embd``; ``max_position_embeddings``,
    GPT-2's ``n_positions``, less RoBERTa's padding offset; DeBERTa without absolute positions has no bound).

    >>> import transformers as tf
    >>> dimensions_from_config(tf.GPT2Config(), "gpt2")
    ModelDimensions(hidden_size=768, positions=1024, attention_dropout=0.1)
    >>> dimensions_from_config(tf.RobertaConfig(max_position_embeddings=514), "roberta")
    ModelDimensions(hidden_size=768, positions=512, attention_dropout=0.1)
    """
    def number(*names: str) -> int | None:
        for name in names:
            value = getattr(config, name, None)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
        return None

    hidden = number("hidden_size", "n_embd", "n_embed", "d_model", "dim")
    positions = number("max_position_embeddings", "n_positions")
    if getattr(config, "position_biased_input", True) is False:  # DeBERTa: relative positions only
        positions = None
    if positions is not None and QUIRKS.get(family, {}).get("positions_after_padding_idx"):
        pad = getattr(config, "pad_token_id", None)
        positions -= (pad if isinstance(pad, int) and pad >= 0 else 1) + 1
    dropout = next((float(v) for name in ATTENTION_DROPOUT_KEYS
                    if isinstance(v := getattr(config, name, None), (int, float)) and not isinstance(v, bool)), None)
    return ModelDimensions(hidden, positions, dropout)


def _tiny_dimensions(family: str) -> ModelDimensions:
    """A tiny model's: :data:`TINY_DIMS`, and its family's default attention dropout (:func:`tiny_config` keeps
    the family's defaults: 0.1, ALBERT's 0)."""
    from transformers import AutoConfig

    try:
        dropout = dimensions_from_config(AutoConfig.for_model(family), family).attention_dropout
    except ValueError:  # not a model_type transformers knows: nothing to read
        dropout = None
    return ModelDimensions(TINY_DIMS["hidden"], TINY_DIMS["positions"], dropout)


def model_dimensions(info: ModelInfo) -> ModelDimensions | None:
    """:class:`ModelDimensions` of a resolved model, from its config alone (no weights, no torch): a tiny
    model's from :data:`TINY_DIMS`, a local folder's or a cached hub model's from its ``config.json``.
    ``None`` when the config cannot be read now (a hub model not cached offline: its load says why)."""
    if info.is_tiny:
        return _tiny_dimensions(info.family)
    try:
        config = load_config(info.hub_id or info.name, info.model_args)
    except (ModelError, UserError, OSError, ValueError):
        return None
    return dimensions_from_config(config, info.family)


def dimensions_on_disk(name: str, model_args: Any = None) -> ModelDimensions | None:
    """:class:`ModelDimensions` of ``name`` read from disk only, never the hub: a tiny model's, a local
    folder's ``config.json``, or the one in the Hugging Face cache; ``None`` when none is there (what a grid's
    load uses: it must not need the network or a downloaded model)."""
    from types import SimpleNamespace

    name = canonical_model(name)
    args = dict(parse_model_args(model_args))
    if name.startswith(TINY_PREFIX):
        return _tiny_dimensions(name[len(TINY_PREFIX):])
    sub = f"{args['subfolder'].strip('/')}/" if args.get("subfolder") else ""
    if is_local(name):
        path: Any = Path(name) / sub / "config.json"
    else:
        from huggingface_hub import try_to_load_from_cache

        hub_id = REGISTRY[name].hub_id if name in REGISTRY else name
        try:
            path = try_to_load_from_cache(hub_id, sub + "config.json", revision=args.get("revision"))
        except (ValueError, OSError):  # e.g. a name that is no hub id
            return None
    if not isinstance(path, (str, Path)):
        return None
    try:
        doc = read_json(path, allow_nan=True)
    except (OSError, JsonProblem):
        return None
    if not isinstance(doc, dict):
        return None
    return dimensions_from_config(SimpleNamespace(**{str(k): v for k, v in doc.items()}), str(doc.get("model_type", "")))


def lm_kind_from_config(config: Any) -> tuple[str | None, str]:
    """(LM kind, MLM head state) from a config: decoder or not, its architectures, its model_type.

    ``masked`` for encoders with a masked-LM class, ``causal`` for decoders; ``mlm_head`` says whether
    the checkpoint's own architectures include a trained masked-LM head.
    """
    from transformers.models.auto import modeling_auto as auto

    family = str(getattr(config, "model_type", "") or "")
    archs = [str(a) for a in (getattr(config, "architectures", None) or [])]
    quirks = QUIRKS.get(family, {})
    causal_arch = any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs)
    mlm_arch = any(a.endswith("ForMaskedLM") or a.endswith("WithLMHead") for a in archs) or any(
        a.endswith("ForPreTraining") for a in archs) and not quirks.get("pretraining_head_is_not_mlm")
    has_mlm_class = family in auto.MODEL_FOR_MASKED_LM_MAPPING_NAMES
    if getattr(config, "is_decoder", False) or (causal_arch and not mlm_arch):
        return "causal", "none"
    if has_mlm_class:
        return "masked", "trained" if (mlm_arch or not archs) else "untrained"
    if family in auto.MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return "causal", "none"
    return None, "none"


def scoring_head(info: ModelInfo) -> str:
    """The LM head bias scoring uses for ``info`` (``masked_lm`` / ``causal_lm``), or :class:`ModelError`."""
    if info.lm_kind is None:
        raise ModelError(f"{info.name} ({info.family}) has neither a masked- nor a causal-LM head: it can be "
                         "fine-tuned but not bias-scored")
    if info.lm_kind == "causal":
        return "causal_lm"
    if info.mlm_head == "untrained" and info.quirks.get("untrained_mlm_head") != "warn":
        raise ModelError(f"{info.name} ships no trained masked-LM head ({info.family} checkpoint without one): its "
                         "bias scores would come from a random head; use a checkpoint saved with its MLM head")
    return "masked_lm"


def has_next_sentence_class(info: ModelInfo) -> bool:
    """Whether ``info``'s family has a next-sentence-prediction class (BERT, MobileBERT, ...): the StereoSet
    intersentence head of the published evaluation. Whether a checkpoint ships that head trained is only known
    when it is loaded (:func:`load_next_sentence_model`)."""
    if info.lm_kind != "masked":
        return False
    from transformers.models.auto import modeling_auto as auto

    return info.family in auto.MODEL_FOR_NEXT_SENTENCE_PREDICTION_MAPPING_NAMES


def check_head(info: ModelInfo, head: str) -> None:
    """Refuse up front a head the model's architecture does not have (one line, before any work)."""
    if head not in HEADS:
        raise ValueError(f"unknown head {head!r}; use one of {HEADS}")
    if head == "causal_lm" and info.lm_kind != "causal":
        raise ModelError(f"{info.name} is {'a masked LM' if info.lm_kind else 'not a language model'}: "
                         "it has no causal LM head")
    if head == "masked_lm":
        if info.lm_kind == "causal":
            raise ModelError(f"{info.name} is a causal LM: score it with its causal LM head")
        scoring_head(info)
    if head == "next_sentence" and not has_next_sentence_class(info):
        raise ModelError(f"{info.name} ({info.family}) has no next-sentence-prediction class in transformers")
    custom = dict(info.model_args).get("trust_remote_code")  # remote code brings its own classes
    if head == "sequence_classification" and not info.is_tiny and info.name not in REGISTRY and not custom:
        from transformers.models.auto import modeling_auto as auto

        if info.family not in auto.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES:
            raise ModelError(f"{info.name} ({info.family}) has no sequence-classification class in transformers: "
                             "it cannot be fine-tuned on GLUE")


@contextlib.contextmanager
def hub_errors(name: str, what: str = "model") -> Iterator[None]:
    """Turn the hub's and transformers' loading errors about ``name`` into one-line :class:`ModelError`."""
    try:
        yield
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - every loading failure becomes one line naming the model
        raise ModelError(describe_load_error(name, exc, what)) from exc


def describe_load_error(name: str, exc: BaseException, what: str = "model") -> str:
    """One line: which model, what went wrong, what to do."""
    from huggingface_hub import errors as hf

    chain: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and len(chain) < 8:
        chain.append(e)
        e = e.__cause__ or e.__context__
    text = " ".join(str(c) for c in chain).lower()

    def has(*types: type) -> bool:
        return any(isinstance(c, types) for c in chain)

    if has(hf.GatedRepoError) or "gated repo" in text:
        return (f"{what} {name} is gated: accept its terms on its hub page and log in "
                "(`hf auth login` or HF_TOKEN)")
    if has(hf.RevisionNotFoundError) or "invalid git identifier" in text or "revision" in text and "not found" in text:
        return f"{what} {name}: revision not found; check model_args revision="
    if has(hf.LocalEntryNotFoundError, hf.OfflineModeIsEnabled) or "offline" in text or "couldn't connect" in text \
            or "cannot find the requested files in the local cache" in text:
        return (f"{what} {name} is not in the local Hugging Face cache and the hub cannot be reached: run "
                f"`vnr prefetch CONFIG` (or `hf download {name}`) on a machine with internet, then retry")
    if has(hf.RepositoryNotFoundError) or "not a valid model identifier" in text or "repository not found" in text:
        return (f"{what} {name} was not found on the hub: check the id for a typo, or, for a private repo, "
                "log in (`hf auth login` or HF_TOKEN)")
    if "safetensor" in text or "unpickl" in text or "deserializ" in text or "unable to load weights" in text \
            or "invalid load key" in text or "pytorch_model" in text and "error" in text:
        return (f"{what} {name}: its weights could not be read ({type(exc).__name__}); the weight file looks "
                "corrupted or truncated: re-save or re-download it")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"cannot load {what} {name}: {type(exc).__name__}: {first[:300]}"


# ---------------------------------------------------------------------- tiny models
TINY_DIMS = {"hidden": 64, "layers": 2, "heads": 2, "intermediate": 128, "positions": 512}


def train_tiny_tokenizer(family: str, texts: Iterable[str], vocab_size: int = 2000) -> Any:
    """A fast tokenizer of the family's kind, trained on ``texts`` (deterministic for the same texts)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    texts = [t for t in texts if t]
    if not texts:
        raise ValueError("a tiny tokenizer needs some text to train on")
    if family in ("roberta", "gpt2"):
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        if family == "gpt2":
            specials = ["<|endoftext|>"]
        else:
            specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator(texts, trainer=trainer)
        if family == "gpt2":
            eos = "<|endoftext|>"
            return PreTrainedTokenizerFast(
                tokenizer_object=tok, bos_token=eos, eos_token=eos, unk_token=eos, pad_token=eos
            )
        bos, eos = tok.token_to_id("<s>"), tok.token_to_id("</s>")
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", bos), ("</s>", eos)]
        )
        return PreTrainedTokenizerFast(
            tokenizer_object=tok,
            bos_token="<s>",
            eos_token="</s>",
            sep_token="</s>",
            cls_token="<s>",
            unk_token="<unk>",
            pad_token="<pad>",
            mask_token="<mask>",
        )
    # WordPiece for bert, albert, deberta, distilbert, electra (uncased, like the hub models).
    # The vocabulary is built here rather than by tokenizers' WordPieceTrainer, whose result changes from
    # one call to the next (ties between "##" merges are broken by hash order): same texts, same vocabulary.
    normalizer = normalizers.BertNormalizer(lowercase=True)
    pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(vocab=_wordpiece_vocab(texts, normalizer, pre_tokenizer, specials, vocab_size),
                                     unk_token="[UNK]"))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.WordPiece()
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="[UNK]",
        sep_token="[SEP]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        mask_token="[MASK]",
    )


def _wordpiece_vocab(texts: list[str], normalizer: Any, pre_tokenizer: Any, specials: list[str],
                     vocab_size: int) -> dict[str, int]:
    """A deterministic WordPiece vocabulary: specials, every character (word-initial and ``##``), then whole
    words by frequency (ties alphabetical), up to ``vocab_size``; unseen words fall back to characters."""
    from collections import Counter

    words: Counter[str] = Counter()
    for text in texts:
        words.update(w for w, _ in pre_tokenizer.pre_tokenize_str(normalizer.normalize_str(text)))
    chars = sorted({c for w in words for c in w})
    vocab = list(dict.fromkeys([*specials, *chars, *(f"##{c}" for c in chars)]))
    taken = set(vocab)
    for word, _ in sorted(words.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(vocab) >= vocab_size:
            break
        if word not in taken:
            vocab.append(word)
            taken.add(word)
    return {token: i for i, token in enumerate(vocab)}


def tiny_config(family: str, tokenizer: Any) -> Any:
    """A small config of the family, sized to the tokenizer's vocabulary."""
    import transformers as tf

    d = TINY_DIMS
    vocab = len(tokenizer)
    common = {"vocab_size": vocab, "pad_token_id": tokenizer.pad_token_id}
    if family == "bert":
        return tf.BertConfig(hidden_size=d["hidden"], num_hidden_layers=d["layers"], num_attention_heads=d["heads"],
                             intermediate_size=d["intermediate"], max_position_embeddings=d["positions"], **common)
    if family == "roberta":
        return tf.RobertaConfig(hidden_size=d["hidden"], num_hidden_layers=d["layers"],
                                num_attention_heads=d["heads"], intermediate_size=d["intermediate"],
                                max_position_embeddings=d["positions"] + 2, bos_token_id=tokenizer.bos_token_id,
                                eos_token_id=tokenizer.eos_token_id, **common)
    if family == "albert":
        return tf.AlbertConfig(embedding_size=32, hidden_size=d["hidden"], num_hidden_layers=d["layers"],
                               num_attention_heads=d["heads"], intermediate_size=d["intermediate"],
                               max_position_embeddings=d["positions"], **common)
    if family == "deberta":
        return tf.DebertaConfig(hidden_size=d["hidden"], num_hidden_layers=d["layers"],
                                num_attention_heads=d["heads"], intermediate_size=d["intermediate"],
                                max_position_embeddings=d["positions"], relative_attention=True,
                                pos_att_type=["c2p", "p2c"], max_relative_positions=-1, **common)
    if family == "electra":
        return tf.ElectraConfig(embedding_size=32, hidden_size=d["hidden"], num_hidden_layers=d["layers"],
                                num_attention_heads=d["heads"], intermediate_size=d["intermediate"],
                                max_position_embeddings=d["positions"], **common)
    if family == "distilbert":
        return tf.DistilBertConfig(dim=d["hidden"], n_layers=d["layers"], n_heads=d["heads"],
                                   hidden_dim=d["intermediate"], max_position_embeddings=d["positions"], **common)
    if family == "gpt2":
        return tf.GPT2Config(n_embd=d["hidden"], n_layer=d["layers"], n_head=d["heads"], n_inner=d["intermediate"],
                             n_positions=d["positions"], bos_token_id=tokenizer.bos_token_id,
                             eos_token_id=tokenizer.eos_token_id, vocab_size=vocab,
                             pad_token_id=tokenizer.eos_token_id)
    raise UserError(f"no tiny config for family {family!r}")


# ---------------------------------------------------------------------- loading
def _auto_class(head: str) -> Any:
    import transformers as tf

    return {
        "sequence_classification": tf.AutoModelForSequenceClassification,
        "masked_lm": tf.AutoModelForMaskedLM,
        "causal_lm": tf.AutoModelForCausalLM,
        "next_sentence": tf.AutoModelForNextSentencePrediction,
    }[head]


def _apply_pad_quirk(info: ModelInfo, tokenizer: Any) -> None:
    """No pad token (GPT-2 style): pad with EOS."""
    if tokenizer.pad_token is None and tokenizer.eos_token is not None:
        if not info.quirks.get("pad_with_eos") and not info.is_tiny:
            log.info("%s: the tokenizer has no pad token; padding with its EOS token", info.name)
        tokenizer.pad_token = tokenizer.eos_token


def _tiny_kwargs(info: ModelInfo) -> dict[str, Any]:
    """``from_config`` options from a tiny model's model_args: its dtype and attention implementation."""
    import torch

    args = dict(info.model_args)
    out: dict[str, Any] = {}
    if args.get("dtype", "auto") != "auto":
        out["dtype"] = getattr(torch, args["dtype"])
    if "attn_implementation" in args:
        out["attn_implementation"] = args["attn_implementation"]
    return out


#: what a tokenizer file is named (a folder with none of these has no tokenizer of its own)
def _is_tokenizer_file(name: str) -> bool:
    return name.startswith(("tokenizer", "vocab")) or name.endswith((".model", ".tiktoken")) or name == "merges.txt"


def _check_tokenizer_files(info: ModelInfo) -> None:
    """A local folder (its subfolder, else its root) must hold the model's own tokenizer files: without them
    ``AutoTokenizer`` builds an empty tokenizer from the config's class and every word becomes unknown."""
    root = Path(info.name)
    folders = [root / dict(info.model_args).get("subfolder", ""), root]
    if not any(p.is_file() and _is_tokenizer_file(p.name) for f in folders if f.is_dir() for p in f.iterdir()):
        raise ModelError(f"model directory {folders[0]} has no tokenizer files (tokenizer.json, vocab.txt, "
                         "vocab.json, *.model, ...): save the model's tokenizer beside it "
                         "(tokenizer.save_pretrained(DIR))")


_SPECIAL_ROLES = ("eos", "bos", "pad", "unk", "mask", "cls", "sep")


def _read_json(path: Path) -> Any:

    try:
        return read_json(path, allow_nan=True)
    except (OSError, JsonProblem):
        return None


def _token_text(value: Any) -> str | None:
    if isinstance(value, Mapping):
        value = value.get("content")
    return value if isinstance(value, str) and value else None


def tokenizer_file_facts(folder: Path) -> tuple[dict[str, int], dict[str, str]]:
    """(token → id, role → special token) read from a tokenizer folder's files alone (no transformers, no
    torch): ``tokenizer.json`` (its model's vocabulary and added tokens), else ``vocab.json`` / ``vocab.txt``,
    plus ``added_tokens.json``; the special tokens from ``tokenizer_config.json`` and
    ``special_tokens_map.json``. A vocabulary only in a sentencepiece ``*.model`` is not read (empty map)."""
    vocab: dict[str, int] = {}
    fast = _read_json(folder / "tokenizer.json") if (folder / "tokenizer.json").is_file() else None
    if isinstance(fast, Mapping):
        table = (fast.get("model") or {}).get("vocab") if isinstance(fast.get("model"), Mapping) else None
        if isinstance(table, Mapping):
            vocab = {str(k): v for k, v in table.items() if isinstance(v, int)}
        elif isinstance(table, list):  # Unigram: [[piece, score], ...], the id is the position
            vocab = {str(e[0]): i for i, e in enumerate(table) if isinstance(e, list) and e}
        for added in fast.get("added_tokens") or ():
            if isinstance(added, Mapping) and isinstance(added.get("id"), int) and _token_text(added):
                vocab[str(added["content"])] = added["id"]
    elif (folder / "vocab.json").is_file():
        table = _read_json(folder / "vocab.json")
        if isinstance(table, Mapping):
            vocab = {str(k): v for k, v in table.items() if isinstance(v, int)}
    elif (folder / "vocab.txt").is_file():
        with contextlib.suppress(OSError, UnicodeDecodeError):
            lines = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
            vocab = {line: i for i, line in enumerate(lines)}
    if vocab and (folder / "added_tokens.json").is_file():
        added_map = _read_json(folder / "added_tokens.json")
        if isinstance(added_map, Mapping):
            vocab.update({str(k): v for k, v in added_map.items() if isinstance(v, int)})
    specials: dict[str, str] = {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):  # the tokenizer's own config wins
        data = _read_json(folder / name) if (folder / name).is_file() else None
        if isinstance(data, Mapping):
            for role in _SPECIAL_ROLES:
                text = _token_text(data.get(f"{role}_token"))
                if text:
                    specials[role] = text
            decoder = data.get("added_tokens_decoder") if vocab else None
            if isinstance(decoder, Mapping):
                for key, entry in decoder.items():
                    if str(key).isdigit() and _token_text(entry):
                        vocab.setdefault(str(_token_text(entry)), int(key))
    return vocab, specials


def check_tokenizer_files_fit(info: ModelInfo) -> None:
    """Refuse a local folder whose tokenizer files are another model's, from the files alone: before torch,
    the data or the weights load (the same rules as :func:`check_tokenizer_fits`, which checks the loaded
    tokenizer again). From ``config.json`` and the tokenizer's files:

    * an id of the tokenizer at or beyond the config's ``vocab_size`` (no embedding row for it);
    * an EOS or BOS token the tokenizer names whose id is not the config's ``eos_token_id``/``bos_token_id``;
    * a decoder whose ``eos_token_id`` is not in the tokenizer, or is the tokenizer's unknown, mask, CLS or
      SEP token (or pad token of a BERT-style tokenizer) while the tokenizer names no EOS (a GPT-2 config
      beside a BERT tokenizer). A tokenizer whose files name no EOS may still have its class's default one,
      so a pad token alone (``<|endoftext|>``) is not taken as foreign.

    A vocabulary the files do not spell out (a sentencepiece ``*.model`` only) is left to the loaded check.
    """
    root = Path(info.name)
    sub = dict(info.model_args).get("subfolder", "")
    config = _read_json(root / sub / "config.json")
    if not isinstance(config, Mapping):
        return
    folder = next((f for f in (root / sub, root) if f.is_dir() and any(
        p.is_file() and _is_tokenizer_file(p.name) for p in f.iterdir())), None)
    if folder is None:
        return
    vocab, specials = tokenizer_file_facts(folder)
    if not vocab:
        return
    fix = "save the model's own tokenizer in its folder (tokenizer.save_pretrained(DIR)) or fix its config"
    rows = config.get("vocab_size")
    top = max(vocab.values())
    if isinstance(rows, int) and not isinstance(rows, bool) and top >= rows:
        raise ModelError(f"{info.name}: its tokenizer has {len(vocab)} tokens (ids up to {top}) but the model "
                         f"embeds only {rows}: the tokenizer is not this model's; {fix}")
    by_id = {i: t for t, i in vocab.items()}
    for what in ("eos", "bos"):
        wanted = _as_ids(config.get(f"{what}_token_id"))
        token = specials.get(what)
        have = vocab.get(token) if token is not None else None
        if wanted and have is not None and have not in wanted:
            raise ModelError(f"{info.name}: the model's config has {what}_token_id "
                             f"{wanted[0] if len(wanted) == 1 else wanted} but its tokenizer's {what.upper()} token "
                             f"{token!r} is id {have}: the tokenizer is not this model's ({info.family}); {fix}")
        if what == "eos" and wanted and token is None and info.lm_kind == "causal":
            held = by_id.get(wanted[0])
            roles = [r for r in _SPECIAL_ROLES if held is not None and specials.get(r) == held]
            encoder_style = any(r in specials for r in ("cls", "sep", "mask"))  # a BERT-style tokenizer
            if roles == ["pad"] and not encoder_style:  # e.g. pad = <|endoftext|>, the class's default EOS
                roles = []
            if held is None or roles:
                where = (f"id {wanted[0]} is not one of its tokens" if held is None else
                         f"id {wanted[0]} is its {roles[0]} token {held!r}")
                raise ModelError(f"{info.name}: the model ({info.family}, a decoder) has eos_token_id {wanted[0]} "
                                 f"but its tokenizer has no EOS token (its files name none; {where}): the tokenizer "
                                 f"is not this model's; {fix}")


#: an English sentence any language-model tokenizer knows most words of (see :func:`check_tokenizer_fits`)
PROBE_TEXT = "The quick brown fox jumps over the lazy dog, and a man is playing a guitar on the street."


def _as_ids(value: Any) -> list[int]:
    if isinstance(value, bool) or value is None:
        return []
    if isinstance(value, int):
        return [value]
    if isinstance(value, list | tuple):
        return [v for v in value if isinstance(v, int) and not isinstance(v, bool)]
    return []


def check_tokenizer_fits(info: ModelInfo, tokenizer: Any, config: Any) -> None:
    """Refuse, before the weights load, a tokenizer that is not the model's (one-line :class:`ModelError`).

    * every id the tokenizer can produce must have an embedding row (``max id < config.vocab_size``, the
      rows the model's embeddings are built with; fewer ids than rows is fine: vocabularies are often
      padded to a multiple of 64 or 128);
    * it must know the words of :data:`PROBE_TEXT` (not all of them unknown, at least one id);
    * the special tokens the model's config names must be the tokenizer's: where both name an EOS (or
      BOS) token they agree, and a decoder whose config names an EOS has a tokenizer with one (padding
      and sequence ends use it). A GPT-2 config beside a BERT tokenizer fails here. Tokenizer classes
      are not compared by name: DistilBERT with ``BertTokenizer``, fast and slow variants and the generic
      ``PreTrainedTokenizerFast`` are all fine when the ids fit.
    """
    rows = getattr(config, "vocab_size", None)
    fix = "save the model's own tokenizer in its folder (tokenizer.save_pretrained(DIR)) or fix its config"
    vocab = tokenizer.get_vocab()
    top = max(vocab.values(), default=-1)
    if isinstance(rows, int) and top >= rows:
        raise ModelError(f"{info.name}: its tokenizer has {len(tokenizer)} tokens (ids up to {top}) but the model "
                         f"embeds only {rows}: the tokenizer is not this model's; {fix}")
    ids = tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"]
    unknown = tokenizer.unk_token_id
    if not ids or (unknown is not None and all(i == unknown for i in ids)):
        raise ModelError(f"{info.name}: its tokenizer ({type(tokenizer).__name__}, {len(tokenizer)} tokens) knows "
                         f"none of the words of an English sentence: it is empty or not this model's; {fix}")
    for what in ("eos", "bos"):
        wanted = _as_ids(getattr(config, f"{what}_token_id", None))
        have = getattr(tokenizer, f"{what}_token_id", None)
        if wanted and have is not None and have not in wanted:
            raise ModelError(f"{info.name}: the model's config has {what}_token_id {wanted[0] if len(wanted) == 1 else wanted} "
                             f"but its tokenizer's {what.upper()} token {getattr(tokenizer, f'{what}_token')!r} is id "
                             f"{have}: the tokenizer is not this model's ({info.family}); {fix}")
        if what == "eos" and wanted and have is None and info.lm_kind == "causal":
            raise ModelError(f"{info.name}: the model ({info.family}, a decoder) has eos_token_id {wanted[0]} but its "
                             f"tokenizer ({type(tokenizer).__name__}) has no EOS token: the tokenizer is not this "
                             f"model's; {fix}")


def load_tokenizer(name: str, *, texts: Iterable[str] | None = None, model_args: Any = None) -> Any:
    """The tokenizer for ``name``; tiny models train one on ``texts``. A local folder must hold the model's
    own tokenizer files (:class:`ModelError` otherwise)."""
    info = resolve_model(name, model_args)
    if info.is_tiny:
        if texts is None:
            raise ValueError(f"{name} needs texts to train its tokenizer on")
        tokenizer = train_tiny_tokenizer(info.family, texts)
    else:
        from transformers import AutoTokenizer

        if info.local:
            _check_tokenizer_files(info)
        else:
            hub_offline()
        args = dict(info.model_args)
        kwargs = {k: args[k] for k in ("revision", "trust_remote_code") if k in args}
        with hub_errors(info.name, "tokenizer of"):
            try:
                tokenizer = AutoTokenizer.from_pretrained(info.hub_id, subfolder=args.get("subfolder", ""), **kwargs)
            except (OSError, ValueError):
                if not args.get("subfolder"):
                    raise
                tokenizer = AutoTokenizer.from_pretrained(info.hub_id, **kwargs)  # tokenizer at the repo root
    _apply_pad_quirk(info, tokenizer)
    return tokenizer


def load_model(
    name: str,
    head: str,
    *,
    texts: Iterable[str] | None = None,
    num_labels: int | None = None,
    problem_type: str | None = None,
    seed: int = 0,
    tokenizer: Any = None,
    model_args: Any = None,
    **from_pretrained_kwargs: Any,
) -> tuple[Any, Any, ModelInfo]:
    """(model, tokenizer, info) for ``name`` with the given head.

    ``texts`` trains a tiny model's tokenizer (ignored for hub models);
    ``num_labels`` / ``problem_type`` configure a classification head
    (``num_labels=1`` with ``problem_type="regression"`` for STS-B); ``seed``
    seeds the random initialisation (tiny models and fresh heads);
    ``model_args`` (see :func:`parse_model_args`) go to ``from_pretrained``.
    Every loading failure is a one-line :class:`ModelError` naming the model.
    """
    if head not in HEADS:
        raise ValueError(f"unknown head {head!r}; use one of {HEADS}")
    info = resolve_model(name, model_args)
    check_head(info, head)
    import torch

    if tokenizer is None:
        tokenizer = load_tokenizer(info.name, texts=texts, model_args=info.model_args)
    head_kwargs: dict[str, Any] = {}
    if head == "sequence_classification":
        if num_labels is None:
            raise ValueError("a classification head needs num_labels")
        head_kwargs = {"num_labels": num_labels}
        if problem_type:
            head_kwargs["problem_type"] = problem_type
    cls = _auto_class(head)
    torch.manual_seed(seed)
    if info.is_tiny:
        config = tiny_config(info.family, tokenizer)
        for key, value in head_kwargs.items():
            setattr(config, key, value)
        with hub_errors(info.name):  # e.g. attn_implementation=flash_attention_2 without its package
            model = cls.from_config(config, **_tiny_kwargs(info))
    else:
        if head == "masked_lm" and info.mlm_head == "untrained":
            log.warning(
                "%s has no trained masked-LM head: its MLM scores come from a randomly "
                "initialised head (the paper's released DeBERTa numbers share this caveat)",
                info.name,
            )
        kwargs = {**dict(info.model_args), **head_kwargs, **from_pretrained_kwargs}
        if not info.local:
            hub_offline()
        check_tokenizer_fits(info, tokenizer, load_config(info.hub_id, info.model_args))
        with hub_errors(info.name):
            model = cls.from_pretrained(info.hub_id, **kwargs)
    if getattr(model.config, "pad_token_id", None) is None and tokenizer.pad_token_id is not None:
        model.config.pad_token_id = tokenizer.pad_token_id
    if info.quirks.get("pad_with_eos"):
        model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer, info


def load_next_sentence_model(name: str, *, tokenizer: Any, seed: int = 0, encoder: Any = None,
                             model_args: Any = None) -> tuple[Any, str]:
    """``(model, "")``: ``name``'s next-sentence-prediction model (``[CLS] A [SEP] B [SEP]`` → is B next),
    or ``(None, why)`` when the checkpoint has no trained next-sentence head.

    A hub or local checkpoint has one when every parameter of that model comes from it (no missing or
    mismatched key in ``from_pretrained``'s loading info): ``bert-base-uncased`` ships its pre-training
    heads; a checkpoint saved from ``BertForMaskedLM`` lacks the pooler and ``cls.seq_relationship``, and
    a random head is never scored. A tiny model is one random checkpoint built from its config: the
    encoder is ``encoder``'s (the MLM model's base model, so both heads sit on one encoder, as in a real
    checkpoint), the pooler and head are random from ``seed``. Loading failures (offline and not cached,
    gated, corrupted) are one-line :class:`ModelError`, as in :func:`load_model`.
    """
    info = resolve_model(name, model_args)
    check_head(info, "next_sentence")
    import torch

    cls = _auto_class("next_sentence")
    torch.manual_seed(seed)
    if info.is_tiny:
        with hub_errors(info.name, "next-sentence model of"):
            model = cls.from_config(tiny_config(info.family, tokenizer), **_tiny_kwargs(info))
        if encoder is not None:
            loaded = model.base_model.load_state_dict(encoder.state_dict(), strict=False)
            foreign = [k for k in loaded.missing_keys if not k.startswith("pooler.")] + list(loaded.unexpected_keys)
            if foreign:
                raise ValueError(f"{info.name}: the MLM encoder does not fit the next-sentence model ({foreign[:3]})")
    else:
        if not info.local:
            hub_offline()
        check_tokenizer_fits(info, tokenizer, load_config(info.hub_id, info.model_args))
        with hub_errors(info.name, "next-sentence model of"):
            model, loading = cls.from_pretrained(info.hub_id, output_loading_info=True, **dict(info.model_args))
        untrained = sorted({*loading.get("missing_keys", ()), *(k[0] if isinstance(k, tuple) else k
                                                                 for k in loading.get("mismatched_keys", ()))})
        if untrained:
            shown = ", ".join(untrained[:4]) + (", ..." if len(untrained) > 4 else "")
            return None, (f"{info.name} has no trained next-sentence head (the checkpoint lacks {shown}): "
                          "not scored with one")
    if getattr(model.config, "pad_token_id", None) is None and tokenizer.pad_token_id is not None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model, ""
