"""A model is what it claims before any work (issue #20): tokenizer files present, tokenizer ids within the
model's embeddings, tokenizer and config of one model; ``model_args`` checked, never silently ignored.

Real tiny models built from a config and saved with ``save_pretrained`` to temporary folders; real GLUE text
from the data root; no hub.
"""

from __future__ import annotations

import importlib.util
import os

import pytest

from harness.cli import main
from harness.models import (
    ModelError,
    _auto_class,
    attention_implementations,
    load_model,
    parse_model_args,
    resolve_model,
    tiny_config,
    train_tiny_tokenizer,
)
from harness.specs import BiasSpec, FinetuneSpec
from ranking.floor.errors import UserError

TEXTS = ["the quick brown fox jumps over the lazy dog .", "a man and a woman walk to the shop .",
         "she is a nurse and he is a doctor .", "the movie was great fun", "the film was dull and long"] * 4
MORE_TEXTS = [*TEXTS, "completely different words widen this vocabulary far beyond the first one",
              "zebras quietly juggle purple umbrellas beneath enormous glittering waterfalls"] * 2


@pytest.fixture(autouse=True)
def _fresh_resolution():
    import harness.models as models

    models._resolve.cache_clear()
    yield
    models._resolve.cache_clear()


def save(folder, family: str, head: str, tokenizer=None, model_tokenizer=None, extra_rows: int = 0):
    """A tiny ``family`` model (sized to ``model_tokenizer``) saved with ``tokenizer`` (None: no tokenizer files)."""
    own = train_tiny_tokenizer(family, TEXTS, vocab_size=200)
    model = _auto_class(head).from_config(tiny_config(family, model_tokenizer or own))
    if extra_rows:
        model.resize_token_embeddings(model.get_input_embeddings().num_embeddings + extra_rows, mean_resizing=False)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    if tokenizer is not None:
        (own if tokenizer == "own" else tokenizer).save_pretrained(folder)
    return folder


def exit_2_one_line(argv, capsys) -> str:
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def finetune_argv(model, out, data_root, *extra):
    return ["finetune", "--model", str(model), "--task", "rte", "--seed", "0", "--output", str(out),
            "--data-root", str(data_root), "--max-steps", "1", "--max-train-samples", "8", "--max-eval-samples", "8",
            "--batch-size", "4", "--no-progress", *extra]


def nothing_recorded(out) -> bool:
    return not (out / "runs").is_dir() or not list((out / "runs").glob("*.json"))


# ---------------------------------------------------------------------- model folders
def test_a_folder_without_tokenizer_files_is_refused_before_any_work(tmp_path, data_root, capsys):
    folder = save(tmp_path / "no-tokenizer", "bert", "masked_lm", tokenizer=None)
    out = tmp_path / "out"
    for argv in (finetune_argv(folder, out, data_root),
                 ["bias", "--model", str(folder), "--dataset", "crows_pairs", "--output", str(out),
                  "--data-root", str(data_root), "--limit", "2", "--no-progress"]):
        err = exit_2_one_line(argv, capsys)
        assert f"model directory {folder} has no tokenizer files" in err and "save_pretrained" in err
    assert nothing_recorded(out)


def test_a_folder_without_weights_or_with_truncated_weights_is_refused_before_any_work(tmp_path, data_root, capsys):
    # both used to pass `vnr run --dry-run`; the run then failed to load ("looks corrupted" even with no file)
    folder = save(tmp_path / "model", "bert", "masked_lm", tokenizer="own")
    weights = folder / "model.safetensors"
    whole = weights.read_bytes()
    out = tmp_path / "out"
    weights.write_bytes(whole[: len(whole) - 100])  # a copy that stopped 100 bytes short
    for argv in (finetune_argv(folder, out, data_root),
                 ["bias", "--model", str(folder), "--dataset", "crows_pairs", "--output", str(out),
                  "--data-root", str(data_root), "--limit", "2", "--no-progress"]):
        err = exit_2_one_line(argv, capsys)
        assert (f"model weight file {weights} is truncated ({len(whole) - 100} bytes, its header says {len(whole)}): "
                "re-save or re-download it") in err
    weights.unlink()
    err = exit_2_one_line(finetune_argv(folder, out, data_root), capsys)
    assert f"model directory {folder} has no weight file (model.safetensors, pytorch_model.bin" in err
    assert nothing_recorded(out)


def test_a_tokenizer_with_more_ids_than_the_embeddings_is_refused(tmp_path, data_root, capsys):
    bigger = train_tiny_tokenizer("bert", MORE_TEXTS, vocab_size=400)
    small = train_tiny_tokenizer("bert", TEXTS, vocab_size=200)
    assert len(bigger) > len(small)
    folder = save(tmp_path / "wrong-vocab", "bert", "masked_lm", tokenizer=bigger, model_tokenizer=small)
    out = tmp_path / "out"
    err = exit_2_one_line(finetune_argv(folder, out, data_root), capsys)
    assert (f"its tokenizer has {len(bigger)} tokens (ids up to {len(bigger) - 1}) but the model embeds only "
            f"{len(small)}") in err
    assert nothing_recorded(out)
    with pytest.raises(ModelError, match="the tokenizer is not this model's"):
        load_model(str(folder), "masked_lm")


def test_a_gpt2_config_with_a_bert_tokenizer_is_refused(tmp_path, data_root, capsys):
    bert_tokenizer = train_tiny_tokenizer("bert", TEXTS, vocab_size=200)
    folder = save(tmp_path / "gpt2-bert", "gpt2", "causal_lm", tokenizer=bert_tokenizer)
    out = tmp_path / "out"
    err = exit_2_one_line(finetune_argv(folder, out, data_root), capsys)
    assert "the model (gpt2, a decoder) has eos_token_id 0 but its tokenizer" in err and "has no EOS token" in err
    err = exit_2_one_line(["bias", "--model", str(folder), "--dataset", "crows_pairs", "--output", str(out),
                           "--data-root", str(data_root), "--limit", "2", "--no-progress"], capsys)
    assert "has no EOS token" in err
    assert nothing_recorded(out)


def test_a_roberta_tokenizer_beside_a_gpt2_config_disagrees_on_eos(tmp_path):
    roberta_tokenizer = train_tiny_tokenizer("roberta", TEXTS, vocab_size=200)
    wide = train_tiny_tokenizer("gpt2", MORE_TEXTS, vocab_size=400)  # room for every id of the roberta tokenizer
    assert len(wide) > len(roberta_tokenizer)
    folder = save(tmp_path / "gpt2-roberta", "gpt2", "causal_lm", tokenizer=roberta_tokenizer, model_tokenizer=wide)
    with pytest.raises(ModelError) as caught:
        load_model(str(folder), "causal_lm")
    assert "has eos_token_id 0 but its tokenizer's EOS token '</s>' is id 2" in str(caught.value)


def test_legitimate_folders_load_and_real_glue_text_fits_the_embeddings(tmp_path, data_root):
    """A padded vocabulary (more embedding rows than tokens), a DistilBERT with a ``BertTokenizer`` and a
    model with its own tokenizer all load; the ids of real RTE sentences are all below the embedding size."""
    from transformers import BertTokenizer

    from harness.finetune.tasks import load_task

    train = load_task("rte", data_root, max_train_samples=64).train
    sentences = [*train.text_a, *train.text_b]
    padded = save(tmp_path / "padded", "bert", "masked_lm", tokenizer="own", extra_rows=64)
    own = train_tiny_tokenizer("distilbert", TEXTS, vocab_size=200)
    bert_class = BertTokenizer(vocab=own.get_vocab(), do_lower_case=True)  # DistilBERT's hub checkpoints use it
    assert len(bert_class) == len(own)
    distil = save(tmp_path / "distilbert", "distilbert", "masked_lm", tokenizer=bert_class)
    gpt2 = save(tmp_path / "gpt2", "gpt2", "causal_lm", tokenizer="own")
    for folder, head in ((padded, "masked_lm"), (distil, "masked_lm"), (gpt2, "causal_lm")):
        model, tokenizer, info = load_model(str(folder), head)
        rows = model.get_input_embeddings().num_embeddings
        ids = tokenizer(sentences, truncation=True, max_length=128)["input_ids"]
        assert max(max(row) for row in ids) < rows, folder
        assert len(tokenizer) <= model.config.vocab_size == rows
    assert load_model(str(padded), "masked_lm")[0].config.vocab_size == len(
        train_tiny_tokenizer("bert", TEXTS, vocab_size=200)) + 64


# ---------------------------------------------------------------------- model_args
@pytest.mark.parametrize("args, message", [
    ({"revision": {"branch": "main"}}, "revision must be one text value (quote it in YAML), not a dict"),
    ({"revision": ["a", "b"]}, "revision must be one text value (quote it in YAML), not a list"),
    ({"revision": None}, "revision must be one text value (quote it in YAML), not null"),
    ({"revision": 1.0}, "revision must be one text value (quote it in YAML), not a float"),
    ({"trust_remote_code": {"x": 1}}, "trust_remote_code must be true or false, not a dict"),
    ({"revision": "main\nx"}, "contains a control character"),
    ({"revision": "v1\x00"}, "contains a control character"),
    ("subfolder=../..", "subfolder '../..' leaves the model folder"),
    ("subfolder=a/../../b", "leaves the model folder"),
    ("subfolder=/etc", "subfolder '/etc' is an absolute path"),
    ("subfolder=.", "is the model folder itself: leave subfolder out"),
    ("attn_implementation=fastest", "attn_implementation 'fastest' is not one transformers accepts: use one of eager"),
])
def test_bad_model_args_are_one_line(args, message):
    with pytest.raises(UserError) as caught:
        parse_model_args(args)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_attention_implementations_are_transformers_own_list():
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    accepted = attention_implementations()
    assert accepted[0] == "eager" and {"sdpa", "flash_attention_2", "flash_attention_3", "flex_attention"} <= set(accepted)
    assert set(accepted) == {"eager", *ALL_ATTENTION_FUNCTIONS.valid_keys()}
    assert parse_model_args("attn_implementation=sdpa,subfolder=./enc//") == (
        ("attn_implementation", "sdpa"), ("subfolder", "enc"))


def test_the_run_id_holds_only_canonical_scalars():
    spec = FinetuneSpec("bert-large-cased", "rte", 0, model_args={"revision": "abc", "dtype": "bf16"})
    assert spec.identity()["model_args"] == {"dtype": "bfloat16", "revision": "abc"}
    assert spec.run_id() == FinetuneSpec("bert-large-cased", "rte", 0, model_args="dtype=bfloat16,revision=abc").run_id()
    with pytest.raises(UserError, match="revision must be one text value"):
        FinetuneSpec("bert-large-cased", "rte", 0, model_args={"revision": {"nested": "x"}})


def test_tiny_models_refuse_the_model_args_they_cannot_honour_and_honour_the_rest(data_root, capsys, tmp_path):
    import torch

    for args in ("revision=main", "subfolder=enc", "trust_remote_code=true"):
        with pytest.raises(ModelError, match="does not apply to a tiny model"):
            FinetuneSpec("tiny:bert", "rte", 0, model_args=args)
        with pytest.raises(ModelError, match="does not apply to a tiny model"):
            BiasSpec("tiny:gpt2", "crows_pairs", model_args=args)
    out = tmp_path / "out"
    err = exit_2_one_line(["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0", "--output", str(out),
                           "--model-args", "revision=main"], capsys)
    assert "revision does not apply to a tiny model" in err and nothing_recorded(out)

    model, _, info = load_model("tiny:bert", "masked_lm", texts=TEXTS, model_args="dtype=bf16,attn_implementation=eager")
    assert model.dtype == torch.bfloat16 and model.config._attn_implementation == "eager"
    plain, _, _ = load_model("tiny:gpt2", "causal_lm", texts=TEXTS)
    assert plain.dtype == torch.float32
    if importlib.util.find_spec("flash_attn") is None:  # an implementation whose package is missing: one line
        with pytest.raises(ModelError, match="cannot load model tiny:bert: ImportError: FlashAttention2"):
            load_model("tiny:bert", "masked_lm", texts=TEXTS, model_args="attn_implementation=flash_attention_2")
    assert FinetuneSpec("tiny:bert", "rte", 0, model_args="dtype=bf16").run_id() != FinetuneSpec(
        "tiny:bert", "rte", 0).run_id()


def test_a_local_folder_refuses_revision_and_a_subfolder_link_leaving_it(tmp_path, capsys):
    folder = save(tmp_path / "ckpt", "bert", "masked_lm", tokenizer="own")
    with pytest.raises(ModelError, match="revision applies to hub ids; a local folder has no revisions"):
        FinetuneSpec(str(folder), "rte", 0, model_args="revision=main")
    outside = save(tmp_path / "elsewhere", "bert", "masked_lm", tokenizer="own")
    os.symlink(outside, folder / "link")
    with pytest.raises(ModelError, match="subfolder 'link' leads outside the model folder"):
        resolve_model(str(folder), "subfolder=link")
    inside = save(folder / "enc", "bert", "masked_lm", tokenizer="own")
    assert resolve_model(str(folder), "subfolder=enc").family == "bert" and inside.is_dir()
    err = exit_2_one_line(["bias", "--model", str(folder), "--dataset", "crows_pairs", "--output",
                           str(tmp_path / "out"), "--model-args", "revision=v2"], capsys)
    assert "a local folder has no revisions" in err
