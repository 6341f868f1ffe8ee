"""Any model: hub ids and local checkpoint directories resolved from their own config, model_args,
canonical run ids, one-line failures, prefetch and the offline check, the Python API.

Models are tiny ones saved with ``save_pretrained`` into temporary directories; the hub is a local
cache directory in the hub's layout (offline) or monkeypatched download functions. Never the network.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.models import (
    ModelError,
    canonical_model,
    check_head,
    local_fingerprint,
    parse_model_args,
    resolve_model,
    scoring_head,
)
from harness.specs import BiasSpec, FinetuneSpec
from ranking.floor.errors import UserError

TEXTS = ["the quick brown fox jumps over the lazy dog .", "a man and a woman walk to the shop .",
         "she is a nurse and he is a doctor .", "the movie was great fun", "the film was dull and long"] * 4


# ---------------------------------------------------------------------- helpers
def save_tiny(family: str, folder: Path, head: str = "masked_lm") -> Path:
    """A tiny model of ``family`` with ``head`` and its tokenizer, saved with save_pretrained."""
    from harness.models import _auto_class, tiny_config, train_tiny_tokenizer

    tok = train_tiny_tokenizer(family, TEXTS, vocab_size=200)
    config = tiny_config(family, tok)
    model = _auto_class(head).from_config(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def save_config(folder: Path, config) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)
    return folder


def fake_hub_cache(cache: Path, repo_id: str, source: Path, commit: str = "0" * 40) -> Path:
    """Put ``source``'s files into ``cache`` in the hub cache layout (what a download leaves behind)."""
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True, exist_ok=True)
    for f in source.iterdir():
        if f.is_file():
            (snap / f.name).write_bytes(f.read_bytes())
    (repo / "refs").mkdir(exist_ok=True)
    (repo / "refs" / "main").write_text(commit)
    return snap


@pytest.fixture
def hub_cache(tmp_path, monkeypatch):
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    return cache


@pytest.fixture
def online(monkeypatch):
    """The hub 'reachable' (its download functions are monkeypatched by each test)."""
    from huggingface_hub import constants

    import harness.models as models

    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(models, "_hub_reachable", lambda: True)
    models._resolve.cache_clear()
    yield
    models._resolve.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_resolution():
    import harness.models as models

    models._resolve.cache_clear()
    yield
    models._resolve.cache_clear()


def one_line_exit_2(argv, capsys) -> str:
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1, err
    return err


# ---------------------------------------------------------------------- model_args
def test_parse_model_args_is_canonical():
    assert parse_model_args("revision=v1, dtype=bf16,trust_remote_code=yes") == (
        ("dtype", "bfloat16"), ("revision", "v1"), ("trust_remote_code", True))
    assert parse_model_args({"torch_dtype": "torch.float16", "subfolder": "ckpt"}) == (
        ("dtype", "float16"), ("subfolder", "ckpt"))
    assert parse_model_args("attn_implementation=eager") == (("attn_implementation", "eager"),)
    assert parse_model_args(None) == parse_model_args("") == ()


@pytest.mark.parametrize("text, message", [
    ("revision", "is not key=value"),
    ("device_map=auto", "unknown model argument 'device_map'"),
    ("dtype=int8", "dtype 'int8'"),
    ("trust_remote_code=maybe", "trust_remote_code must be true or false"),
    ("revision=a,revision=b", "revision given twice"),
    ("subfolder=", "subfolder needs a value"),
])
def test_parse_model_args_rejects(text, message):
    with pytest.raises(UserError, match=message):
        parse_model_args(text)


# ---------------------------------------------------------------------- names and run ids
def test_alias_and_hub_id_are_one_model():
    assert canonical_model("FacebookAI/roberta-base") == "roberta-base"
    assert canonical_model("openai-community/gpt2") == "gpt2"
    assert canonical_model("deberta-base") == "microsoft/deberta-base"
    a = FinetuneSpec("FacebookAI/roberta-base", "RTE", 0)
    b = FinetuneSpec("roberta-base", "rte", 0)
    assert a == b and a.run_id() == b.run_id()
    assert BiasSpec("openai-community/gpt2", "winobias").run_id() == BiasSpec("gpt2", "winobias").run_id()


def test_plain_specs_keep_their_identity_and_model_args_change_it():
    spec = FinetuneSpec("bert-large-cased", "rte", 0)
    assert spec.model == "bert-large-cased"
    assert "model_args" not in spec.identity() and "model_fingerprint" not in spec.identity()
    with_args = FinetuneSpec("bert-large-cased", "rte", 0, model_args="revision=abc,dtype=bf16")
    assert with_args.model_args == (("dtype", "bfloat16"), ("revision", "abc"))
    assert with_args.identity()["model_args"] == {"dtype": "bfloat16", "revision": "abc"}
    assert with_args.run_id() != spec.run_id()
    same = FinetuneSpec("bert-large-cased", "rte", 0, model_args={"revision": "abc", "torch_dtype": "bfloat16"})
    assert same.run_id() == with_args.run_id()


def test_local_directory_relative_and_absolute_are_one_model(tmp_path, monkeypatch):
    folder = save_tiny("bert", tmp_path / "ckpt")
    monkeypatch.chdir(tmp_path)
    rel, absolute = FinetuneSpec("./ckpt", "rte", 0), FinetuneSpec(str(folder), "rte", 0)
    assert rel.model == absolute.model == str(folder.resolve())
    assert rel.run_id() == absolute.run_id()
    assert rel.run_id().startswith("finetune-ckpt-rte-s0-")
    assert rel.identity()["model_fingerprint"] == local_fingerprint(folder)
    # A bare existing directory name is a directory too (as from_pretrained decides).
    assert canonical_model("ckpt") == str(folder.resolve())


def test_local_fingerprint_changes_when_the_checkpoint_is_retrained(tmp_path):
    folder = save_tiny("bert", tmp_path / "ckpt")
    before = FinetuneSpec(str(folder), "rte", 0).run_id()
    assert FinetuneSpec(str(folder), "rte", 0).run_id() == before  # stable while nothing changes
    weights = folder / "model.safetensors"
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # re-saved at the same path
    assert FinetuneSpec(str(folder), "rte", 0).run_id() != before
    fp = local_fingerprint(folder)
    (folder / "config.json").write_text((folder / "config.json").read_text() + "\n")
    assert local_fingerprint(folder) != fp


# ---------------------------------------------------------------------- family and kind from the config
def test_family_and_kind_come_from_the_config(tmp_path):
    import transformers as tf

    cases = {
        "mlm": (tf.BertConfig(architectures=["BertForMaskedLM"]), ("bert", "masked", "trained")),
        "bare": (tf.BertConfig(architectures=["BertModel"]), ("bert", "masked", "untrained")),
        "roberta": (tf.RobertaConfig(architectures=["RobertaForMaskedLM"]), ("roberta", "masked", "trained")),
        "decoder": (tf.BertConfig(is_decoder=True, architectures=["BertLMHeadModel"]), ("bert", "causal", "none")),
        "gpt2": (tf.GPT2Config(architectures=["GPT2LMHeadModel"]), ("gpt2", "causal", "none")),
        "electra": (tf.ElectraConfig(architectures=["ElectraForPreTraining"]), ("electra", "masked", "untrained")),
        "deberta": (tf.DebertaConfig(architectures=["DebertaModel"]), ("deberta", "masked", "untrained")),
    }
    for name, (config, expected) in cases.items():
        info = resolve_model(str(save_config(tmp_path / name, config)))
        assert (info.family, info.lm_kind, info.mlm_head) == expected, name
        assert info.local and info.hub_id == str((tmp_path / name).resolve())
    # A bare encoder or an ELECTRA discriminator has no trained MLM head: bias scoring refused up front;
    # DeBERTa keeps the paper's caveat (a warning); a decoder is scored with its causal head.
    for name in ("bare", "electra"):
        with pytest.raises(ModelError, match="no trained masked-LM head"):
            scoring_head(resolve_model(str(tmp_path / name)))
    assert scoring_head(resolve_model(str(tmp_path / "deberta"))) == "masked_lm"
    assert scoring_head(resolve_model(str(tmp_path / "decoder"))) == "causal_lm"
    with pytest.raises(ModelError, match="is a causal LM"):
        check_head(resolve_model(str(tmp_path / "gpt2")), "masked_lm")
    check_head(resolve_model(str(tmp_path / "bare")), "sequence_classification")


def test_encoder_decoder_and_headless_models_are_refused_up_front(tmp_path, capsys):
    import transformers as tf

    t5 = save_config(tmp_path / "t5", tf.T5Config())
    with pytest.raises(ModelError, match="encoder-decoder"):
        resolve_model(str(t5))
    err = one_line_exit_2(["finetune", "--model", str(t5), "--task", "rte", "--seed", "0",
                           "--output", str(tmp_path / "out")], capsys)
    assert "encoder-decoder" in err and str(t5) in err
    assert not (tmp_path / "out" / "runs").exists() or not list((tmp_path / "out" / "runs").iterdir())
    clip = save_config(tmp_path / "vision", tf.CLIPVisionConfig())
    info = resolve_model(str(clip))
    assert info.lm_kind is None
    with pytest.raises(ModelError, match="neither a masked- nor a causal-LM head"):
        scoring_head(info)
    with pytest.raises(ModelError, match="no sequence-classification class"):
        check_head(info, "sequence_classification")


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing", "does not exist"),
    (lambda p: (p / "empty").mkdir() or p / "empty", "has no config.json"),
    (lambda p: (p / "file.bin").write_text("x") and p / "file.bin", "is a file"),
])
def test_bad_local_directories_exit_2_with_one_line(tmp_path, capsys, make, message):
    target = make(tmp_path)
    out = tmp_path / "out"
    for argv in (["finetune", "--model", str(target), "--task", "rte", "--seed", "0"],
                 ["bias", "--model", str(target), "--dataset", "winobias"]):
        err = one_line_exit_2([*argv, "--output", str(out)], capsys)
        assert message in err and target.name in err
    assert not (out / "runs").exists() or not list((out / "runs").iterdir())


def test_corrupted_weights_exit_2_and_record_nothing(tmp_path, data_root, capsys):
    folder = save_tiny("bert", tmp_path / "ckpt", head="sequence_classification")
    (folder / "model.safetensors").write_bytes(b"\x00garbage, not a safetensors file")
    out = tmp_path / "out"
    err = one_line_exit_2(["finetune", "--model", str(folder), "--task", "rte", "--seed", "0", "--output", str(out),
                           "--data-root", str(data_root), "--max-steps", "1", "--max-train-samples", "8",
                           "--max-eval-samples", "8", "--no-progress"], capsys)
    assert str(folder) in err and "corrupted" in err
    assert not list((out / "runs").glob("*.json"))


# ---------------------------------------------------------------------- end to end from local directories
def test_finetune_and_bias_run_from_local_directories(tmp_path, data_root, capsys, monkeypatch):
    bert = save_tiny("bert", tmp_path / "my-bert")
    gpt2 = save_tiny("gpt2", tmp_path / "my-gpt2", head="causal_lm")
    out = tmp_path / "out"
    monkeypatch.chdir(tmp_path)
    assert main(["finetune", "--model", "./my-bert", "--task", "rte", "--seed", "0", "--output", str(out),
                 "--data-root", str(data_root), "--max-steps", "2", "--max-train-samples", "16",
                 "--max-eval-samples", "16", "--batch-size", "8", "--no-progress"]) == 0
    (path,) = (out / "runs").glob("finetune-*.json")
    record = json.loads(path.read_text())
    assert record["status"] == "ok" and record["model"] == str(bert.resolve())
    assert record["identity"]["model_fingerprint"] == local_fingerprint(bert)
    assert record["train"]["global_step"] == 2

    assert main(["bias", "--model", str(gpt2), "--dataset", "winobias", "--output", str(out),
                 "--data-root", str(data_root), "--limit", "4", "--no-progress", "--model-args", "dtype=float32"]) == 0
    (path,) = (out / "runs").glob("bias-*.json")
    record = json.loads(path.read_text())
    assert record["model"] == str(gpt2.resolve()) and record["model_args"] == {"dtype": "float32"}
    assert record["scoring"]["lm_kind"] == "causal"
    assert (record["precision"], record["scoring"]["dtype"], record["scoring"]["tf32"]) == ("fp32", "float32", False)


# ---------------------------------------------------------------------- hub ids (offline cache, patched hub)
def test_any_hub_id_resolves_from_the_offline_cache(tmp_path, hub_cache, data_root):
    import harness

    fake_hub_cache(hub_cache, "someone/tiny-gpt2", save_tiny("gpt2", tmp_path / "src", head="causal_lm"))
    info = resolve_model("someone/tiny-gpt2")
    assert (info.name, info.hub_id, info.family, info.lm_kind, info.local) == (
        "someone/tiny-gpt2", "someone/tiny-gpt2", "gpt2", "causal", False)
    record = harness.score_bias("someone/tiny-gpt2", "crows_pairs", output=tmp_path / "out", data_root=data_root,
                                limit=4)
    assert record["status"] == "ok" and record["model"] == "someone/tiny-gpt2"
    assert record["scoring"]["precision"] == "fp32"


def test_missing_offline_exits_2_naming_prefetch(tmp_path, hub_cache, capsys):
    err = one_line_exit_2(["bias", "--model", "someone/not-downloaded", "--dataset", "winobias",
                           "--output", str(tmp_path / "out")], capsys)
    assert "someone/not-downloaded" in err and "vnr prefetch" in err
    assert not (tmp_path / "out" / "runs").exists()


def _hub_error(cls, message):
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    return exc


def serve_from(monkeypatch, cache: Path, repos: dict[str, Path]) -> None:
    """transformers' single-file hub download, served from local folders into the fake cache."""
    import transformers.utils.hub as tf_hub
    from huggingface_hub import errors

    def download(repo_id, filename, **kwargs):
        source = repos.get(repo_id)
        if source is None:
            raise _hub_error(errors.RepositoryNotFoundError, f"404 {repo_id}")
        if not (source / filename).is_file():
            raise _hub_error(errors.EntryNotFoundError, f"404 {repo_id}/{filename}")
        return str(fake_hub_cache(cache, repo_id, source) / filename)

    monkeypatch.setattr(tf_hub, "hf_hub_download", download)


@pytest.mark.parametrize("error, message", [
    ("GatedRepoError", "is gated: accept its terms"),
    ("RepositoryNotFoundError", "was not found on the hub: check the id for a typo"),
])
def test_gated_and_unknown_repos_exit_2_with_one_line(tmp_path, hub_cache, online, monkeypatch, capsys,
                                                      error, message):
    import transformers.utils.hub as tf_hub
    from huggingface_hub import errors

    def refuse(repo_id, filename, **kwargs):
        raise _hub_error(getattr(errors, error), f"401 Client Error for {repo_id}/{filename}")

    monkeypatch.setattr(tf_hub, "hf_hub_download", refuse)
    out = tmp_path / "out"
    err = one_line_exit_2(["finetune", "--model", "someone/privat-model", "--task", "rte", "--seed", "0",
                           "--output", str(out)], capsys)
    assert "someone/privat-model" in err and message in err
    assert not (out / "runs").exists() or not list((out / "runs").iterdir())


def test_an_unreachable_hub_means_offline_at_once(monkeypatch, hub_cache):
    from huggingface_hub import constants

    import harness.models as models

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(models, "_hub_reachable", lambda: False)
    assert models.hub_offline() is True
    assert constants.HF_HUB_OFFLINE is True and os.environ["HF_HUB_OFFLINE"] == "1"
    with pytest.raises(ModelError, match="not in the local Hugging Face cache"):
        resolve_model("someone/elsewhere")


# ---------------------------------------------------------------------- prefetch and the up-front check
def _grid(tmp_path: Path, models: str) -> Path:
    config = tmp_path / "grid.yaml"
    config.write_text(f"name: g\noutput: {tmp_path / 'results'}\nfinetune:\n  models: {models}\n  tasks: [rte]\n"
                      "  seeds: [0]\nbias:\n  datasets: [winobias]\n")
    return config


def test_prefetch_downloads_models_and_says_where(tmp_path, hub_cache, online, monkeypatch, data_root, capsys):
    import huggingface_hub

    src = save_tiny("bert", tmp_path / "src")
    calls = []

    def list_repo_files(self, repo_id, revision=None, **kwargs):
        return ["config.json", "model.safetensors", "pytorch_model.bin", "tokenizer.json", "onnx/model.onnx"]

    def snapshot_download(repo_id, revision=None, allow_patterns=None, **kwargs):
        calls.append((repo_id, revision, tuple(allow_patterns)))
        return str(fake_hub_cache(hub_cache, repo_id, src))

    monkeypatch.setattr(huggingface_hub.HfApi, "list_repo_files", list_repo_files)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    serve_from(monkeypatch, hub_cache, {"someone/tiny-bert": src})  # the config read when the grid is loaded
    config = _grid(tmp_path, "[someone/tiny-bert, tiny:gpt2]")
    assert main(["prefetch", str(config), "--data-root", str(data_root)]) == 0
    out = capsys.readouterr().out
    ((repo, revision, patterns),) = calls
    assert (repo, revision) == ("someone/tiny-bert", None)
    assert "*.safetensors" in patterns and not any(p.endswith(".bin") for p in patterns)  # one set of weights
    assert f"model someone/tiny-bert: {hub_cache}" in out
    assert f"GLUE task rte: in the data root {data_root}" in out
    assert "bias set winobias:" in out and "nothing to fetch for tiny:gpt2" in out

    from harness.prefetch import model_cached

    assert model_cached("someone/tiny-bert")


def test_offline_run_and_status_name_what_is_missing(tmp_path, hub_cache, data_root, capsys, monkeypatch):
    import transformers as tf

    # The hub model's config is cached but not its weights: the grid loads, the up-front check refuses.
    fake_hub_cache(hub_cache, "someone/half-there", save_config(tmp_path / "cfg", tf.BertConfig(
        architectures=["BertForMaskedLM"], vocab_size=100, hidden_size=32, num_hidden_layers=1,
        num_attention_heads=2, intermediate_size=37)))
    config = _grid(tmp_path, "[someone/half-there, tiny:bert]")
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "datasets-cache")
    monkeypatch.delenv("VNR_DATA_ROOT", raising=False)
    monkeypatch.setenv("VNR_CACHE_DIR", str(tmp_path / "empty-cache"))
    err = one_line_exit_2(["run", str(config)], capsys)
    assert "model someone/half-there" in err and "bias set winobias" in err and "GLUE task rte" in err
    assert f"vnr prefetch {config}" in err
    assert not (tmp_path / "results" / "runs").exists()
    # status reads the config and the run store only (issue 29): it works, and names what is missing in a note
    assert main(["status", str(config), "--summary"]) == 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("note: not on disk yet") and len(err.splitlines()) == 1
    assert "model someone/half-there" in err and f"vnr prefetch {config}" in err
    # With the data root and the weights on disk, nothing is missing.
    fake_hub_cache(hub_cache, "someone/half-there", save_tiny("bert", tmp_path / "full"))
    from harness.grid.config import load_experiment
    from harness.prefetch import check_available

    check_available(load_experiment(config), data_root=data_root)


# ---------------------------------------------------------------------- the API and precision
def test_api_and_cli_make_the_same_run(tmp_path, data_root, monkeypatch, capsys):
    import harness

    monkeypatch.setenv("VNR_DATA_ROOT", str(data_root))  # data_root=None means $VNR_DATA_ROOT, as in the CLI
    record = harness.finetune("tiny:bert", "rte", seed=0, output=tmp_path, max_steps=1, max_train_samples=8,
                              max_eval_samples=8, batch_size=4, track_efficiency=False)
    assert record["status"] == "ok" and record["train"]["data_source"].startswith(str(data_root))
    capsys.readouterr()
    assert main(["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0", "--output", str(tmp_path),
                 "--max-steps", "1", "--max-train-samples", "8", "--max-eval-samples", "8", "--batch-size", "4",
                 "--no-progress"]) == 0
    assert capsys.readouterr().out.startswith("already done: ")
    assert [p.stem for p in (tmp_path / "runs").glob("*.json")] == [record["run_id"]]
    with pytest.raises(UserError, match="which GLUE task"):
        harness.finetune("tiny:bert")


def test_import_harness_stays_light():
    code = "import sys, harness; harness.score_bias; print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_bias_scoring_is_exact_fp32_by_default():
    import torch

    from harness.bias.scoring import MaskedLMScorer, resolve_device_dtype
    from harness.models import load_model

    assert BiasSpec("tiny:bert", "winobias").precision == "fp32"
    assert resolve_device_dtype()[1] == torch.float32
    model, tok, _ = load_model("tiny:bert", "masked_lm", texts=TEXTS)
    scorer = MaskedLMScorer(model, tok)
    assert scorer.dtype == torch.float32 and scorer.tf32 is False
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        with scorer.exact_matmuls():
            assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_a_bias_set_missing_from_the_data_root_counts_as_available_from_the_cache(tmp_path, monkeypatch, data_root):
    """The offline check reads a data root per set, like the loader: the cache serves what the root lacks."""
    import shutil

    from harness.bias.data import CACHE_ENV
    from harness.bias.prefetch import bias_available

    root, cache = tmp_path / "root", tmp_path / "cache"
    shutil.copytree(data_root / "bias" / "crows_pairs", root / "bias" / "crows_pairs")
    monkeypatch.setenv(CACHE_ENV, str(cache))
    assert bias_available("crows_pairs", root) and not bias_available("stereoset", root)
    shutil.copytree(data_root / "bias" / "stereoset", cache / "bias" / "stereoset")  # what vnr prefetch leaves
    assert bias_available("stereoset", root)
