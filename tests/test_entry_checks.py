"""Issue 29's held-out sweep, harness side: settings a run would fail on later are refused at its entry, in one
line that says what to fix (exit 2 from the CLI), before any record, torch weights or data are touched."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from harness.cli import main as vnr
from harness.finetune.adapters import default_target_modules, parse_peft, target_modules
from harness.grid.config import load_experiment
from ranking.floor.errors import UserError


def _finetune(capsys, tmp_path: Path, data_root: Path, *extra: str, model: str = "tiny:bert") -> str:
    out = tmp_path / "o"
    argv = ["finetune", "--model", model, "--task", "rte", "--seed", "0", "--data-root", str(data_root),
            "--output", str(out), "--max-steps", "2", "--no-progress", *extra]
    assert vnr(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert not (out / "runs").exists() or not any((out / "runs").iterdir())  # nothing recorded
    return err[0]


# ---------------------------------------------------------------------- --peft-args with a key twice
def test_peft_args_with_a_key_twice_are_refused():
    with pytest.raises(UserError, match=r"peft: 'r' is given twice \(r=8 and r=16\): give it once"):
        parse_peft("method=lora,r=8,r=16")
    with pytest.raises(UserError, match=r"'alpha' is given twice"):
        parse_peft([["method", "lora"], ["alpha", 16], ["alpha", 32]])
    assert dict(parse_peft("method=lora,r=16"))["r"] == 16  # once is fine


def test_cli_peft_args_with_a_key_twice_exit_2(capsys, tmp_path, data_root):
    err = _finetune(capsys, tmp_path, data_root, "--peft", "lora", "--peft-args", "r=8,r=16")
    assert "--peft-args: 'r' is given twice (r=8 and r=16): give it once" in err


# ---------------------------------------------------------------------- LoRA rank and max_length vs the model
def test_a_lora_rank_above_the_hidden_size_is_refused_naming_it(capsys, tmp_path, data_root):
    err = _finetune(capsys, tmp_path, data_root, "--peft", "lora", "--peft-args", f"r={10**9}")
    assert "peft: r 1000000000 is above tiny:bert's hidden size 64" in err and "r=64" in err


@pytest.mark.parametrize("model", ["tiny:bert", "tiny:gpt2", "tiny:roberta"])
def test_max_length_beyond_the_models_positions_is_refused(model, capsys, tmp_path, data_root):
    err = _finetune(capsys, tmp_path, data_root, "--max-length", "513", model=model)
    assert f"max_length 513 is beyond {model}'s positions: its position embeddings hold 512 tokens" in err
    assert "give max_length 512 or less" in err


def test_dimensions_come_from_the_config_of_a_local_checkpoint(tmp_path):
    import transformers as tf

    from harness.models import dimensions_from_config, model_dimensions, resolve_model

    folder = tmp_path / "gpt2ish"
    folder.mkdir()
    tf.GPT2Config(n_embd=48, n_positions=40, n_layer=1, n_head=2).save_pretrained(folder)
    dims = model_dimensions(resolve_model(str(folder)))
    assert (dims.hidden_size, dims.positions) == (48, 40)  # GPT-2: n_embd, n_positions
    # RoBERTa's positions start after the padding index; DeBERTa without absolute positions has no bound
    assert dimensions_from_config(tf.RobertaConfig(max_position_embeddings=514, pad_token_id=1), "roberta").positions == 512
    assert dimensions_from_config(tf.DebertaConfig(position_biased_input=False), "deberta").positions is None


@pytest.mark.parametrize("dropout_key", ["attention_probs_dropout_prob", "attn_pdrop"])
def test_flex_attention_on_a_model_with_attention_dropout_is_refused_at_entry(dropout_key, tmp_path, capsys,
                                                                            data_root):
    """transformers' flex attention raises at the first training step when attention dropout is on (seen on an
    H100, scripts/bench_attention.py): vnr finetune says so before anything loads, and dropout 0 passes."""
    import transformers as tf

    from harness.finetune.fit_checks import check_fits_dimensions
    from harness.models import dimensions_on_disk
    from harness.specs import FinetuneSpec

    folder = tmp_path / "ckpt"
    folder.mkdir()
    config = tf.BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64) \
        if dropout_key.startswith("attention") else tf.GPT2Config(n_embd=32, n_layer=1, n_head=2)
    config.save_pretrained(folder)
    dims = dimensions_on_disk(str(folder))
    assert dims.attention_dropout == 0.1
    flex = FinetuneSpec(str(folder), "rte", 0, model_args={"attn_implementation": "flex_attention"})
    with pytest.raises(UserError, match=r"^attn_implementation flex_attention cannot train .*ckpt: the model drops "
                                        r"attention probabilities \(0.1\) .* use sdpa \(the default\) or eager"):
        check_fits_dimensions(flex, str(folder), dims)
    check_fits_dimensions(FinetuneSpec(str(folder), "rte", 0, model_args={"attn_implementation": "sdpa"}),
                          str(folder), dims)
    check_fits_dimensions(flex, str(folder), type(dims)(dims.hidden_size, dims.positions, 0.0))
    err = _finetune(capsys, tmp_path, data_root, "--model-args", "attn_implementation=flex_attention",
                    model="tiny:bert" if dropout_key.startswith("attention") else "tiny:gpt2")
    assert "attn_implementation flex_attention cannot train tiny:" in err and "(0.1)" in err


def test_grid_load_refuses_max_length_and_rank_a_tiny_model_cannot_hold(tmp_path):
    config = tmp_path / "grid.yaml"
    config.write_text("finetune: {models: [tiny:bert], tasks: [rte], hyperparameters: {max_length: 1024}}\n")
    with pytest.raises(UserError, match=r"finetune \(tiny:bert, rte, seed 0\): max_length 1024 is beyond"):
        load_experiment(config)
    config.write_text("finetune: {models: [tiny:bert], tasks: [rte], hyperparameters: {peft: {r: 100000}}}\n")
    with pytest.raises(UserError, match=r"peft: r 100000 is above tiny:bert's hidden size 64"):
        load_experiment(config)


# ---------------------------------------------------------------------- LoRA targets from peft's table
def test_lora_targets_default_from_peft_then_our_table():
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as theirs

    assert default_target_modules("stablelm") == (tuple(theirs["stablelm"]), "peft's default for stablelm")
    assert target_modules({"method": "lora"}, "stablelm", "m") == tuple(theirs["stablelm"])  # refused before
    assert default_target_modules("distilbert") == (("q_lin", "v_lin"), "default for distilbert")  # peft has none
    for family, (targets, source) in ((f, default_target_modules(f)) for f in theirs if f != "phi"):
        assert targets == tuple(theirs[family]) and source.startswith("peft's")  # peft's entry wins elsewhere
    # phi keeps the targets its stored runs were trained with (the default is not part of a run's id)
    assert default_target_modules("phi") == (("q_proj", "v_proj"), "default for phi (kept: stored runs used it)")


def test_lora_on_a_stablelm_model_uses_pefts_targets():
    import torch
    import transformers as tf

    from harness.finetune.adapters import apply_peft

    config = tf.StableLmConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                               num_attention_heads=2, num_key_value_heads=2, num_labels=2, pad_token_id=0)
    torch.manual_seed(0)
    model = tf.AutoModelForSequenceClassification.from_config(config)
    _, record = apply_peft(model, dict(parse_peft("lora")), "stablelm", "tiny-stablelm")
    assert record["target_modules_source"] == "peft's default for stablelm"
    assert set(record["target_modules"]) == {"q_proj", "v_proj"} and record["trainable_parameters"] > 0


# ---------------------------------------------------------------------- trackers that are not installed
@pytest.fixture
def no_wandb(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))


def test_grid_load_and_dry_run_refuse_a_tracker_that_is_not_installed(no_wandb, tmp_path, capsys):
    config = tmp_path / "grid.yaml"
    config.write_text("finetune: {models: [tiny:bert], tasks: [rte], run_options: {report_to: [tensorboard, wandb]}}\n")
    with pytest.raises(UserError, match=r"finetune.run_options.report_to: wandb is not installed: pip install wandb"):
        load_experiment(config)
    assert vnr(["run", str(config), "--dry-run", "--output", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "wandb is not installed: pip install wandb" in err[0], err
    config.write_text("finetune: {models: [tiny:bert], tasks: [rte], run_options: {report_to: tensorboard}}\n")
    assert load_experiment(config).run_options["finetune"]["report_to"] == ("tensorboard",)  # installed: fine


# ---------------------------------------------------------------------- a foreign tokenizer, from the files
TEXTS = ["the quick brown fox jumps over the lazy dog .", "a man and a woman walk to the shop .",
         "she is a nurse and he is a doctor .", "the movie was great fun", "the film was dull and long"] * 4


def _checkpoint(folder: Path, family: str, tokenizer_family: str, *, vocab_size: int | None = None) -> Path:
    """A tiny ``family`` config (no weights needed for the file check: a stand-in weight file) beside a
    tokenizer of ``tokenizer_family``."""
    from harness.models import tiny_config, train_tiny_tokenizer

    own = train_tiny_tokenizer(family, TEXTS, vocab_size=200)
    config = tiny_config(family, own)
    if vocab_size is not None:
        config.vocab_size = vocab_size
    folder.mkdir(parents=True)
    config.save_pretrained(folder)
    (folder / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")  # header only
    tokenizer = own if tokenizer_family == family else train_tiny_tokenizer(tokenizer_family, TEXTS, vocab_size=200)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.parametrize(("family", "tokenizer_family", "vocab_size", "message"), [
    ("gpt2", "bert", None, "the model (gpt2, a decoder) has eos_token_id 0 but its tokenizer has no EOS token "
                           "(its files name none; id 0 is its pad token '[PAD]')"),
    ("gpt2", "roberta", 400, "has eos_token_id 0 but its tokenizer's EOS token '</s>' is id 2"),
    ("bert", "bert", 10, "but the model embeds only 10: the tokenizer is not this model's"),
])
def test_a_foreign_tokenizer_is_found_from_the_files(family, tokenizer_family, vocab_size, message, tmp_path,
                                                      monkeypatch):
    import harness.models as models

    models._resolve.cache_clear()
    folder = _checkpoint(tmp_path / "m", family, tokenizer_family, vocab_size=vocab_size)

    def no_loading(*args, **kwargs):
        raise AssertionError("the tokenizer or the weights were loaded")

    monkeypatch.setattr(models, "load_tokenizer", no_loading)
    monkeypatch.setattr(models, "load_model", no_loading)
    with pytest.raises(models.ModelError, match="the tokenizer is not this model's") as caught:
        models.check_local_files(models.resolve_model(str(folder)))
    assert message in str(caught.value)


def test_the_file_check_reads_no_tokenizer_or_weights_and_passes_a_models_own(tmp_path, monkeypatch):
    import transformers as tf

    import harness.models as models

    models._resolve.cache_clear()
    own = _checkpoint(tmp_path / "own", "gpt2", "gpt2")
    foreign = _checkpoint(tmp_path / "foreign", "gpt2", "bert")

    def no_loading(*args, **kwargs):
        raise AssertionError("a tokenizer or weights were loaded")

    monkeypatch.setattr(tf.AutoTokenizer, "from_pretrained", no_loading)
    monkeypatch.setattr(tf.PreTrainedModel, "from_pretrained", classmethod(no_loading))
    models.check_local_files(models.resolve_model(str(own)))  # its own tokenizer: fine
    with pytest.raises(models.ModelError, match="its tokenizer has no EOS token"):
        models.check_local_files(models.resolve_model(str(foreign)))


def test_vnr_finetune_refuses_a_foreign_tokenizer_before_loading_anything(tmp_path, data_root, capsys, monkeypatch):
    import harness.models as models

    models._resolve.cache_clear()
    folder = _checkpoint(tmp_path / "m", "gpt2", "bert")
    monkeypatch.setattr(models, "load_tokenizer", lambda *a, **k: (_ for _ in ()).throw(AssertionError("loaded")))
    err = _finetune(capsys, tmp_path, data_root, model=str(folder))
    assert "has eos_token_id 0 but its tokenizer has no EOS token" in err


# ---------------------------------------------------------------------- --sbatch-args and file patterns
@pytest.mark.parametrize("folder", ["res[1]", "res*", "res?"])
def test_sbatch_args_refuse_a_log_folder_the_shell_would_glob(folder, tmp_path, capsys):
    """`sbatch $(vnr run CONFIG --sbatch-args) ...` globs its words (res[1] would become an existing res1) and
    keeps quotes literally, so such a folder is refused in one line, naming it quoted, before anything is made."""
    import shlex

    config = tmp_path / "grid.yaml"
    out = tmp_path / folder
    (tmp_path / "res1" / "logs" / "sbatch").mkdir(parents=True)  # what the pattern would match
    config.write_text(f"finetune: {{models: [tiny:bert], tasks: [rte]}}\noutput: {json.dumps(str(out))}\n")
    assert vnr(["run", str(config), "--sbatch-args"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and not captured.out, err
    assert f"the log folder {shlex.quote(str(out.resolve() / 'logs' / 'sbatch'))} has" in err[0]
    assert "give the grid an output folder without * ? [" in err[0]
    assert not out.exists()


def test_grid_load_reads_a_hub_models_dimensions_from_the_cache_only(tmp_path, monkeypatch):
    """A hub model whose config.json is in the HF cache is checked at load (before calibration or an array
    starts); one not on disk is left to its run (the load never asks the hub)."""
    import transformers as tf
    from huggingface_hub import constants

    import harness.models as models

    cache = tmp_path / "hub"
    snapshot = cache / "models--someone--small-gpt2" / "snapshots" / ("a" * 40)
    snapshot.mkdir(parents=True)
    (cache / "models--someone--small-gpt2" / "refs").mkdir()
    (cache / "models--someone--small-gpt2" / "refs" / "main").write_text("a" * 40)
    tf.GPT2Config(n_embd=48, n_positions=40, n_layer=1, n_head=2).save_pretrained(snapshot)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(models, "_hub_reachable", lambda: pytest.fail("the load asked the hub"))
    config = tmp_path / "grid.yaml"
    config.write_text("finetune: {models: [someone/small-gpt2], tasks: [rte], hyperparameters: {max_length: 64}}\n")
    with pytest.raises(UserError, match=r"max_length 64 is beyond someone/small-gpt2's positions: its position "
                                        r"embeddings hold 40 tokens"):
        load_experiment(config)
    config.write_text("finetune: {models: [someone/small-gpt2], tasks: [rte], hyperparameters: {max_length: 32, peft: {r: 64}}}\n")
    with pytest.raises(UserError, match=r"peft: r 64 is above someone/small-gpt2's hidden size 48"):
        load_experiment(config)
    config.write_text("finetune: {models: [bert-base-uncased], tasks: [rte], hyperparameters: {max_length: 4096}}\n")
    assert len(load_experiment(config).specs) == 1  # an alias not on disk: its run checks it


@pytest.mark.parametrize("name", ["a" * 10_000, "org/" + "b" * 300, "/tmp/" + "c" * 300])
def test_a_model_name_no_hub_id_or_folder_can_have_is_one_bounded_line(name, capsys, tmp_path, data_root):
    """A name too long for any hub id or folder path (a paste gone wrong) is refused before the disk or the hub
    is asked (which raised 'File name too long' with ten thousand characters of it), and the line stays short."""
    err = _finetune(capsys, tmp_path, data_root, model=name)
    assert "characters long: no hub id (owner/name, at most 96 characters each) or folder path" in err
    assert len(err) < 400
    config = tmp_path / "grid.yaml"
    config.write_text(f"finetune: {{models: ['{name}'], tasks: [rte]}}\n")
    with pytest.raises(UserError, match="characters long: no hub id") as refused:
        load_experiment(config)
    assert len(str(refused.value)) < 400
