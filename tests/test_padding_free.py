"""Batch layouts (harness.finetune.batching) per family, on tiny models and real GLUE text (RTE pairs).

* The layout ``auto`` picks (bucketed: padded to a multiple of 8) gives the same loss and gradients as the
  plainly padded batch (to the longest example), ≤ 1e-5 relative in fp32 with dropout off, for BERT,
  RoBERTa, DeBERTa-v2, DistilBERT, GPT-2 and Llama.
* Why not flattened: the stock flattened batch (``DataCollatorWithFlattening``) gives one prediction per
  flattened row, not one per example, in every family; and for the encoders the attention is not even
  block-diagonal. If a transformers release fixes either, these tests fail: revisit ``FLATTENING``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from harness.finetune.batching import (  # noqa: E402
    FLATTENING,
    PAD_MULTIPLE,
    choose_batching,
    make_collator,
    padded_width,
)
from harness.finetune.tasks import get_task, load_task  # noqa: E402
from harness.models import load_tokenizer, tiny_config  # noqa: E402
from harness.specs import FinetuneSpec  # noqa: E402
from ranking.errors import UserError  # noqa: E402

FAMILIES = ("bert", "roberta", "deberta-v2", "distilbert", "gpt2", "llama")
N_EXAMPLES = 6


@pytest.fixture(scope="module")
def rte(data_root: Path):
    """Six RTE training pairs of varied lengths (the shortest up to the 70th percentile, none truncated at 128
    tokens), in data order."""
    split = load_task(get_task("rte"), data_root, max_train_samples=200).train
    order = sorted(range(len(split)), key=lambda i: len(split.text_a[i]) + len(split.text_b[i]))
    picks = sorted(order[int(0.7 * k * (len(order) - 1) / (N_EXAMPLES - 1))] for k in range(N_EXAMPLES))
    return ([split.text_a[i] for i in picks], [split.text_b[i] for i in picks], [split.label[i] for i in picks],
            split.texts())


def _model(family: str, texts: list[str]):
    """(model_type, tiny fp32 classification model in eval mode, tokenizer) for ``family``."""
    torch.manual_seed(0)
    if family in ("deberta-v2", "llama"):
        tokenizer = load_tokenizer("tiny:bert" if family == "deberta-v2" else "tiny:gpt2", texts=texts)
        common = {"vocab_size": len(tokenizer), "hidden_size": 64, "num_hidden_layers": 2,
                  "num_attention_heads": 2, "intermediate_size": 128, "num_labels": 2,
                  "pad_token_id": tokenizer.pad_token_id}
        if family == "deberta-v2":
            config = transformers.DebertaV2Config(max_position_embeddings=512, relative_attention=True,
                                                  pos_att_type=["c2p", "p2c"], position_buckets=64, **common)
        else:
            config = transformers.LlamaConfig(num_key_value_heads=1, max_position_embeddings=512, **common)
        model = transformers.AutoModelForSequenceClassification.from_config(config)
    else:
        tokenizer = load_tokenizer(f"tiny:{family}", texts=texts)
        config = tiny_config(family, tokenizer)
        config.num_labels = 2
        model = transformers.AutoModelForSequenceClassification.from_config(config)
    assert model.config.model_type == family
    return family, model.float().eval(), tokenizer


def _features(tokenizer, rte) -> list[dict]:
    a, b, labels, _ = rte
    enc = tokenizer(a, b, truncation=True, max_length=128)
    return [{**{k: enc[k][i] for k in enc}, "labels": labels[i]} for i in range(len(labels))]


def _loss_and_grads(model, batch) -> tuple[float, dict[str, torch.Tensor]]:
    model.zero_grad()
    out = model(**batch)
    out.loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return float(out.loss.detach()), grads


@pytest.mark.parametrize("family", FAMILIES)
def test_auto_layout_gives_the_padded_batch_loss_and_gradients(family, rte):
    model_type, model, tokenizer = _model(family, rte[3])
    features = _features(tokenizer, rte)
    lengths = [len(f["input_ids"]) for f in features]
    assert len(set(lengths)) == N_EXAMPLES  # varied lengths: each example is padded differently

    batching = choose_batching(model_type, "auto")
    assert batching == {"mode": "bucketed", "pad_to_multiple_of": PAD_MULTIPLE, "requested": "auto"}
    padded = make_collator(tokenizer, choose_batching(model_type, "pad"))(features)
    bucketed = make_collator(tokenizer, batching)(features)
    assert padded["input_ids"].shape == (N_EXAMPLES, max(lengths))
    assert bucketed["input_ids"].shape == (N_EXAMPLES, padded_width(lengths, PAD_MULTIPLE))
    assert max(lengths) % PAD_MULTIPLE != 0  # so the bucketed batch carries extra padding columns
    assert bucketed["input_ids"].shape[1] % PAD_MULTIPLE == 0 and bucketed["input_ids"].shape[1] > max(lengths)
    assert int(bucketed["attention_mask"].sum()) == int(padded["attention_mask"].sum()) == sum(lengths)
    assert bucketed["labels"].tolist() == padded["labels"].tolist() == rte[2]  # same examples, same order

    loss_p, grads_p = _loss_and_grads(model, padded)
    loss_b, grads_b = _loss_and_grads(model, bucketed)
    assert loss_b == pytest.approx(loss_p, rel=1e-5)
    assert grads_b.keys() == grads_p.keys() and len(grads_p) > 10
    # The attention key biases' gradient is exactly zero in exact arithmetic (softmax ignores a shift shared by
    # every key), so theirs is rounding alone (~1e-12, either sign): the floor is the float rounding of the
    # whole gradient, not a fixed 1e-12.
    floor = 1e-9 * float(torch.sqrt(sum(g.norm() ** 2 for g in grads_p.values())))
    for name, g in grads_p.items():
        scale = float(g.norm())
        assert float((grads_b[name] - g).norm()) <= 1e-5 * scale + floor, name


@pytest.mark.parametrize("family", FAMILIES)
def test_stock_flattening_gives_one_prediction_per_batch_not_per_example(family, rte):
    """Why ``auto`` never flattens a classification batch: the heads pool one token per row."""
    model_type, model, tokenizer = _model(family, rte[3])
    features = [{"input_ids": f["input_ids"]} for f in _features(tokenizer, rte)]
    flat = transformers.DataCollatorWithFlattening()(features)
    assert flat["input_ids"].shape == (1, sum(len(f["input_ids"]) for f in features))
    flat.pop("labels")  # the collator turns labels into per-token language-modelling labels
    with torch.no_grad():
        logits = model(**flat).logits
    assert logits.shape == (1, 2)  # N_EXAMPLES examples in, one prediction out
    assert model_type in FLATTENING
    with pytest.raises(UserError, match=f"padding flatten is not supported for model_type {model_type}"):
        choose_batching(model_type, "flatten")


@pytest.mark.parametrize("family", ["bert", "roberta", "distilbert", "gpt2", "llama"])
def test_packed_position_ids_mask_only_the_causal_models(family, rte):
    """The first example's hidden states in a flattened row equal its own only where the mask honours packing
    (causal models, masking_utils.find_packed_sequence_indices); the encoders let examples attend to each other."""
    model_type, model, tokenizer = _model(family, rte[3])
    features = [{"input_ids": f["input_ids"]} for f in _features(tokenizer, rte)]
    first = len(features[0]["input_ids"])
    flat = transformers.DataCollatorWithFlattening(
        position_ids_start=model.config.pad_token_id + 1 if family == "roberta" else 0)(features)
    alone = torch.tensor([features[0]["input_ids"]])
    positions = flat["position_ids"][:, :first]
    with torch.no_grad():
        packed_h = model.base_model(input_ids=flat["input_ids"], position_ids=flat["position_ids"]).last_hidden_state
        alone_h = model.base_model(input_ids=alone, position_ids=positions).last_hidden_state
    same = torch.allclose(packed_h[0, :first], alone_h[0], atol=1e-5)
    assert same == (family in ("gpt2", "llama"))


def test_padding_option_is_validated_and_named_in_the_run_id_when_explicit():
    base = FinetuneSpec("tiny:bert", "rte", 0)
    assert "padding" not in base.identity()  # auto: the run ids of before the option
    ids = {p: FinetuneSpec("tiny:bert", "rte", 0, padding=p).run_id() for p in ("auto", "bucket", "pad")}
    assert ids["auto"] == base.run_id() and len(set(ids.values())) == 3  # another width, another dropout draw
    with pytest.raises(UserError, match="padding 'none': use one of auto, flatten, bucket, pad"):
        choose_batching("bert", "none")
    with pytest.raises(UserError, match="padding: 'zero' is not one of auto, flatten, bucket, pad"):
        FinetuneSpec("tiny:bert", "rte", 0, padding="zero")  # the spec's declared field refuses it


# ---------------------------------------------------------------------- token accounting (record's "tokens")
def _hand_countable_root(root: Path) -> Path:
    """An SST-2 folder whose 4 training sentences have 1-4 words: 3, 4, 5, 6 tokens with [CLS] and [SEP]
    (the tiny WordPiece vocabulary holds every word whole)."""
    folder = root / "glue" / "SST-2"
    folder.mkdir(parents=True)
    rows = ["sentence\tlabel", "good\t1", "very bad\t0", "not very good\t1", "a really very bad\t0"]
    (folder / "train.tsv").write_text("\n".join(rows) + "\n")
    (folder / "dev.tsv").write_text("sentence\tlabel\ngood\t1\nbad\t0\n")
    return root


@pytest.mark.parametrize("padding, batch_size, computed_per_epoch", [
    ("auto", 2, 2 * (2 * 8)),  # bucketed: every batch of two is 8 wide (all lengths <= 8), whatever the order
    ("pad", 4, 4 * 6),  # one batch of all four, padded to the longest (6)
])
def test_record_counts_real_and_computed_tokens_exactly(tmp_path: Path, padding, batch_size, computed_per_epoch):
    from harness.finetune import run_finetune

    spec = FinetuneSpec("tiny:bert", "sst2", 0, epochs=2, batch_size=batch_size, padding=padding)
    rec = run_finetune(spec, tmp_path / "out", data_root=_hand_countable_root(tmp_path / "data"), progress=False,
                       track_efficiency=False)
    tokens = rec["tokens"]
    real = (3 + 4 + 5 + 6) * 2
    assert (tokens["samples"], tokens["real_tokens"], tokens["computed_tokens"]) == (8, real, 2 * computed_per_epoch)
    assert tokens["padding_share"] == pytest.approx(1 - real / (2 * computed_per_epoch))
    assert tokens["train_seconds"] > 0
    assert tokens["samples_per_s"] == pytest.approx(8 / tokens["train_seconds"])
    assert tokens["tokens_per_s"] == pytest.approx(real / tokens["train_seconds"])
    assert tokens["computed_tokens_per_s"] == pytest.approx(2 * computed_per_epoch / tokens["train_seconds"])
    mode = "bucketed" if padding == "auto" else "padded"
    assert rec["settings"]["batching"] == {"mode": mode, "pad_to_multiple_of": 8 if mode == "bucketed" else None,
                                           "requested": padding}
    assert rec["hyperparameters"]["padding"] == padding


def test_flatten_is_refused_before_anything_is_recorded(tmp_path: Path, data_root: Path):
    from harness.finetune import run_finetune
    from harness.store import RunStore

    spec = FinetuneSpec("tiny:bert", "rte", 0, padding="flatten")
    with pytest.raises(UserError, match="padding flatten is not supported for model_type bert"):
        run_finetune(spec, tmp_path, data_root=data_root, progress=False, track_efficiency=False)
    assert RunStore(tmp_path).get(spec.run_id()) is None


def test_the_spec_declares_the_padding_options_the_batching_code_knows():
    from typing import get_args

    from harness.finetune.batching import PADDING_OPTIONS
    from harness.specs import Padding

    assert get_args(Padding) == PADDING_OPTIONS


def test_vnr_finetune_refuses_an_unknown_padding_in_one_line_and_writes_nothing(tmp_path, capsys):
    from harness.cli import main

    out = tmp_path / "out"
    code = main(["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0", "--padding", "zero",
                 "--output", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["vnr finetune: error: --padding: 'zero' is not one of auto, flatten, bucket, pad"]
    assert not out.exists()


@pytest.mark.parametrize("family", FAMILIES)
def test_the_calibration_memory_probe_runs_a_full_batch_and_changes_nothing(family, rte):
    """The calibration's memory probe (one full batch_size x max_length forward and backward in each burst
    run's warm-up, so N is bounded by the shape's peak, not the first task's short texts) works for every
    family and leaves the weights as they were, with no gradients kept."""
    from harness.grid.calibrate import memory_probe

    _, model, _ = _model(family, rte[3])
    model.train()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    memory_probe(model, FinetuneSpec("tiny:bert", "rte", 0, batch_size=3, max_length=128))  # only its shape is read
    assert all(p.grad is None for p in model.parameters())
    assert all(torch.equal(p, before[n]) for n, p in model.named_parameters())
