"""Model registry: the paper's seven models (plus gpt2-medium) and offline ``tiny:<family>`` models.

Every model is loaded through :func:`load_model`, which returns a model with
the requested head and its tokenizer, with each family's quirks handled:

* GPT-2 has no pad token: the tokenizer pads with EOS and the model's
  ``pad_token_id`` is set to ``eos_token_id`` (needed for batched
  classification, where the last non-pad token is pooled).
* RoBERTa-style byte-level BPE tokenizers get ``add_prefix_space`` only
  where a caller passes pre-split words (not needed here).
* microsoft/deberta-base ships no trained MLM head: loading it for masked-LM
  scoring warns (the paper's released DeBERTa bias numbers have the same
  caveat, see the data README).

``tiny:<family>`` (bert, roberta, albert, deberta, distilbert, gpt2) builds a
small randomly initialised model of that family from its config, with a
tokenizer trained on the caller's text (WordPiece for the BERT-like families,
byte-level BPE for RoBERTa and GPT-2), wrapped as a regular transformers fast
tokenizer; after loading it goes through exactly the same code as a hub model.
Nothing here touches the network unless a hub id is given.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ranking.errors import UserError

log = logging.getLogger(__name__)

HEADS = ("sequence_classification", "masked_lm", "causal_lm")


@dataclass(frozen=True)
class ModelInfo:
    name: str  # what the user wrote / what results are keyed by
    hub_id: str | None  # None for tiny models
    family: str  # bert | roberta | albert | deberta | distilbert | gpt2
    lm_kind: str  # masked | causal

    @property
    def is_tiny(self) -> bool:
        return self.hub_id is None


_FAMILY_KIND = {
    "bert": "masked",
    "roberta": "masked",
    "albert": "masked",
    "deberta": "masked",
    "distilbert": "masked",
    "gpt2": "causal",
}

REGISTRY: dict[str, ModelInfo] = {
    m.name: m
    for m in (
        ModelInfo("bert-base-uncased", "bert-base-uncased", "bert", "masked"),
        ModelInfo("roberta-base", "FacebookAI/roberta-base", "roberta", "masked"),
        ModelInfo("albert-base-v2", "albert/albert-base-v2", "albert", "masked"),
        ModelInfo("microsoft/deberta-base", "microsoft/deberta-base", "deberta", "masked"),
        ModelInfo("distilbert-base-uncased", "distilbert/distilbert-base-uncased", "distilbert", "masked"),
        ModelInfo("distilroberta-base", "distilbert/distilroberta-base", "roberta", "masked"),
        # The authors' released results use gpt2; their paper text says gpt2-medium.
        ModelInfo("gpt2", "openai-community/gpt2", "gpt2", "causal"),
        ModelInfo("gpt2-medium", "openai-community/gpt2-medium", "gpt2", "causal"),
    )
}
ALIASES = {"deberta-base": "microsoft/deberta-base", "bert-base": "bert-base-uncased"}
TINY_PREFIX = "tiny:"


def resolve_model(name: str) -> ModelInfo:
    """The registry entry for ``name`` (a registered id, an alias, or ``tiny:<family>``)."""
    if name.startswith(TINY_PREFIX):
        family = name[len(TINY_PREFIX) :]
        if family not in _FAMILY_KIND:
            raise UserError(
                f"unknown tiny model {name!r}: use one of {', '.join(TINY_PREFIX + f for f in _FAMILY_KIND)}"
            )
        return ModelInfo(name, None, family, _FAMILY_KIND[family])
    key = ALIASES.get(name, name)
    if key not in REGISTRY:
        known = ", ".join([*REGISTRY, *(TINY_PREFIX + f for f in _FAMILY_KIND)])
        raise UserError(f"unknown model {name!r} (known: {known})")
    return REGISTRY[key]


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
    # WordPiece for bert, albert, deberta, distilbert (uncased, like the hub models).
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
    }[head]


def load_tokenizer(name: str, *, texts: Iterable[str] | None = None) -> Any:
    """The tokenizer for ``name``; tiny models train one on ``texts``."""
    info = resolve_model(name)
    if info.is_tiny:
        if texts is None:
            raise ValueError(f"{name} needs texts to train its tokenizer on")
        tokenizer = train_tiny_tokenizer(info.family, texts)
    else:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(info.hub_id)
    if info.family == "gpt2" and tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
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
    **from_pretrained_kwargs: Any,
) -> tuple[Any, Any, ModelInfo]:
    """(model, tokenizer, info) for ``name`` with the given head.

    ``texts`` trains a tiny model's tokenizer (ignored for hub models);
    ``num_labels`` / ``problem_type`` configure a classification head
    (``num_labels=1`` with ``problem_type="regression"`` for STS-B); ``seed``
    seeds the random initialisation (tiny models and fresh heads).
    """
    if head not in HEADS:
        raise ValueError(f"unknown head {head!r}; use one of {HEADS}")
    info = resolve_model(name)
    if head == "causal_lm" and info.lm_kind != "causal":
        raise UserError(f"{name} is a masked LM: it has no causal LM head")
    if head == "masked_lm" and info.lm_kind != "masked":
        raise UserError(f"{name} is a causal LM: score it with its causal LM head")
    import torch

    if tokenizer is None:
        tokenizer = load_tokenizer(name, texts=texts)
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
        model = cls.from_config(config)
    else:
        if info.family == "deberta" and head == "masked_lm":
            log.warning(
                "%s has no trained masked-LM head on the hub: its MLM scores come from a randomly "
                "initialised head (the paper's released numbers share this caveat)",
                name,
            )
        model = cls.from_pretrained(info.hub_id, **head_kwargs, **from_pretrained_kwargs)
    if info.family == "gpt2":
        model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer, info
