"""LoRA fine-tuning (peft) and trackers (report_to) on tiny BERT and a tiny Llama-style local checkpoint.

The Llama model is a randomly initialised ``LlamaForCausalLM`` saved with a byte-level BPE tokenizer to a
temporary directory: the "local checkpoint" path a user's billion-parameter decoder takes, at toy size.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from harness.cli import main as vnr
from harness.finetune import run_finetune
from harness.finetune.adapters import TARGET_MODULES, apply_peft, head_modules, parse_peft
from harness.finetune.tasks import get_task, load_task
from harness.grid.config import load_experiment
from harness.specs import FinetuneSpec
from harness.store import RunStore
from ranking.floor.errors import UserError

RTE = get_task("rte")
SMALL = {"max_steps": 12, "max_train_samples": 64, "max_eval_samples": 32, "batch_size": 8, "learning_rate": 5e-3}
SMALL_FLAGS = ["--max-steps", "12", "--max-train-samples", "64", "--max-eval-samples", "32", "--batch-size", "8",
               "--lr", "5e-3"]


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory, data_root: Path) -> Path:
    """A tiny Llama-style causal LM (2 layers, hidden 64) and its tokenizer, saved as a local checkpoint."""
    import transformers as tf

    from harness.models import train_tiny_tokenizer

    texts = load_task(RTE, data_root, max_train_samples=500).train.texts()
    tokenizer = train_tiny_tokenizer("gpt2", texts)
    config = tf.LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                            num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                            bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                            pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-llama")
    tf.LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# ---------------------------------------------------------------------- settings and run ids
def test_settings_are_canonical_and_name_the_run():
    plain = FinetuneSpec("tiny:bert", "rte", 0)
    assert plain.run_id() == "finetune-tiny_bert-rte-s0-ed29c4daa44a"  # unchanged by this feature
    assert "peft" not in plain.identity()
    lora = FinetuneSpec("tiny:bert", "rte", 0, peft="lora")
    assert lora.peft == (("alpha", 16.0), ("dropout", 0.1), ("method", "lora"), ("r", 8))
    same = [FinetuneSpec("tiny:bert", "rte", 0, peft=p) for p in
            ({"method": "lora", "r": 8}, "method=lora,r=8,alpha=16,dropout=0.1", [["method", "lora"], ["alpha", 16]])]
    assert {s.run_id() for s in same} == {lora.run_id()} and lora.run_id() != plain.run_id()
    assert lora.identity()["peft"] == {"alpha": 16.0, "dropout": 0.1, "method": "lora", "r": 8}
    assert FinetuneSpec("tiny:bert", "rte", 0, peft={"r": 4}).run_id() != lora.run_id()
    named = FinetuneSpec("tiny:bert", "rte", 0, peft={"target_modules": ["value", "query"]})
    assert named.run_id() == FinetuneSpec("tiny:bert", "rte", 0, peft="target_modules=query+value").run_id()
    assert named.run_id() != lora.run_id()  # the family default is not written into the id
    assert FinetuneSpec("tiny:bert", "rte", 0, peft="none").run_id() == plain.run_id()
    # the isolated runner's JSON round trip gives the same run
    from dataclasses import asdict

    again = FinetuneSpec.from_mapping(json.loads(json.dumps(asdict(named))))
    assert again == named and again.run_id() == named.run_id()
    full = FinetuneSpec.from_mapping(json.loads(json.dumps(asdict(plain))))  # peft () → [] in JSON: still off
    assert full.peft == () and full.run_id() == plain.run_id()


@pytest.mark.parametrize(("value", "message"), [
    ({"r": 0}, "peft: r: 0 is below 1"),
    ({"dropout": 1}, "peft: dropout: 1 must be below 1"),
    ({"alpha": -2}, "peft: alpha: -2 must be above 0"),
    ("ia3", "peft: method: 'ia3' is not one of lora"),
    ({"rank": 8}, "peft: unknown key 'rank' — remove it or fix its spelling (allowed: method, r, alpha, dropout, target_modules)"),
    ({"target_modules": []}, "peft: target_modules: give at least one module name"),
])
def test_bad_settings_are_refused_in_one_line(value, message):
    with pytest.raises(UserError) as err:
        FinetuneSpec("tiny:bert", "rte", 0, peft=value)
    assert str(err.value).startswith(message)


def test_head_modules_per_family(llama_dir: Path):
    """What stays fully trainable: every module of the classifier outside its base model."""
    import transformers as tf

    from harness.models import tiny_config, train_tiny_tokenizer

    expected = {"bert": ["classifier"], "distilbert": ["pre_classifier", "classifier"], "roberta": ["classifier"],
                "deberta": ["pooler", "classifier"], "albert": ["classifier"], "gpt2": ["score"]}
    for family, heads in expected.items():
        config = tiny_config(family, train_tiny_tokenizer(family, ["a tiny text to train on"] * 4, vocab_size=60))
        config.num_labels = 2
        assert head_modules(tf.AutoModelForSequenceClassification.from_config(config)) == heads, family
    llama = tf.AutoModelForSequenceClassification.from_pretrained(llama_dir, num_labels=2)
    assert head_modules(llama) == ["score"]


# ---------------------------------------------------------------------- what trains
@pytest.mark.parametrize(("model", "family", "trainable"), [
    ("tiny:bert", "bert", 2 * 2 * 8 * (64 + 64) + (64 * 2 + 2)),  # query, value per layer; classifier + bias
    ("llama", "llama", 2 * 2 * 8 * (64 + 64) + 64 * 2),  # q_proj, v_proj per layer; score (no bias)
])
def test_lora_trains_only_the_adapters_and_the_head(model, family, trainable, llama_dir, data_root):
    from harness.models import load_model

    name = str(llama_dir) if model == "llama" else model
    data = load_task(RTE, data_root, max_train_samples=8)
    net, tokenizer, info = load_model(name, "sequence_classification", texts=data.train.texts(), num_labels=2)
    assert info.family == family
    before = {k: v.clone() for k, v in net.state_dict().items()}
    wrapped, record = apply_peft(net, dict(parse_peft({"dropout": 0.0})), info.family, info.name)
    assert record["trainable_parameters"] == trainable
    assert record["trainable_parameters"] == sum(p.numel() for p in wrapped.parameters() if p.requires_grad)
    lora = sum(p.numel() for n, p in wrapped.named_parameters() if "lora_" in n)
    assert record["total_parameters"] == sum(v.numel() for v in before.values()) + lora

    batch = tokenizer(data.train.text_a, data.train.text_b, padding=True, truncation=True, max_length=64,
                      return_tensors="pt")
    labels = torch.tensor(data.train.label)
    optimizer = torch.optim.AdamW([p for p in wrapped.parameters() if p.requires_grad], lr=1e-2)
    wrapped.eval()  # no dropout: the same batch gives the same loss until the weights change
    losses = []
    for _ in range(20):  # one fixed batch, repeated: the loss must fall
        loss = wrapped(**batch, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses

    def original(key: str) -> str:  # peft's name of a wrapped weight -> the model's own name
        for part in (".base_layer", ".original_module", ".modules_to_save.default"):
            key = key.replace(part, "")
        return key

    after = wrapped.get_base_model().state_dict()
    assert {original(k) for k in after if "lora_" not in k} == set(before)
    for key, value in after.items():
        if "lora_B" in key:
            assert value.abs().sum() > 0, key  # initialised to zero, trained
        elif ".modules_to_save." in key:
            assert not torch.equal(value, before[original(key)]), key  # the head trained
        elif "lora_" not in key:
            assert torch.equal(value, before[original(key)]), key  # every base weight bit-identical


# ---------------------------------------------------------------------- end to end
def test_lora_on_flattened_batches_trains_as_on_padded_ones(llama_dir, data_root, tmp_path):
    """Through the real Trainer (training, evaluation, token accounting): with every dropout off, the flattened
    run (one row per batch, no padding) follows the padded run's losses and metrics."""
    runs = {}
    for padding in ("flatten", "pad"):
        spec = FinetuneSpec(str(llama_dir), "rte", 0, peft={"r": 4, "alpha": 8, "dropout": 0.0}, padding=padding,
                            **SMALL)
        runs[padding] = run_finetune(spec, tmp_path, data_root=data_root, progress=False, track_efficiency=False)
    flat, padded = runs["flatten"], runs["pad"]
    assert flat["settings"]["batching"]["mode"] == "flattened"
    assert flat["tokens"]["real_tokens"] == padded["tokens"]["real_tokens"]
    assert flat["tokens"]["padding_share"] < padded["tokens"]["padding_share"]  # RTE, batch 8: 16 % against 30 %
    assert flat["train"]["train_loss"] == pytest.approx(padded["train"]["train_loss"], rel=1e-4)
    for got, want in zip(flat["history"], padded["history"], strict=True):
        assert got["eval_loss"] == pytest.approx(want["eval_loss"], rel=1e-4)
    assert flat["metrics"] == pytest.approx(padded["metrics"], rel=1e-4)


def test_vnr_finetune_lora_on_a_local_llama_with_tensorboard(llama_dir, data_root, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["finetune", "--model", str(llama_dir), "--task", "rte", "--seed", "0", "--data-root", str(data_root),
            "--output", str(out), *SMALL_FLAGS, "--peft", "lora", "--peft-args", "r=4,alpha=8",
            "--report-to", "tensorboard", "--no-progress"]
    assert vnr(argv) == 0
    assert "lora r=4: 2,176 of " in capsys.readouterr().out
    spec = FinetuneSpec(str(llama_dir), "rte", 0, peft={"r": 4, "alpha": 8}, **SMALL)
    rec = RunStore(out).get(spec.run_id())
    assert rec["status"] == "ok" and rec["identity"]["peft"] == {"alpha": 8.0, "dropout": 0.1, "method": "lora", "r": 4}
    peft = rec["peft"]
    assert (peft["method"], peft["r"], peft["alpha"]) == ("lora", 4, 8.0)
    assert peft["target_modules"] == ["q_proj", "v_proj"] and peft["target_modules_source"] == "peft's default for llama"
    assert peft["modules_to_save"] == ["score"] and peft["trainable_parameters"] == 2 * 2 * 4 * 128 + 128
    assert "peft" not in rec["hyperparameters"] and rec["train"]["global_step"] == 12
    logs = out / "logs" / spec.run_id()
    assert rec["settings"]["report_to"] == ["tensorboard"]
    assert rec["settings"]["tracker_environment"] == {"TENSORBOARD_LOGGING_DIR": str(logs.resolve())}
    events = list(logs.glob("events.out.tfevents.*"))
    assert events and events[0].stat().st_size > 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    scalars = EventAccumulator(str(logs)).Reload().Tags()["scalars"]
    assert "train/loss" in scalars and "eval/accuracy" in scalars


def test_grid_config_with_lora_and_report_to(data_root, tmp_path):
    config = tmp_path / "grid.yaml"
    config.write_text(
        "finetune:\n  models: [tiny:bert]\n  tasks: [rte]\n  seeds: [0]\n"
        f"  hyperparameters: {json.dumps({**SMALL, 'peft': {'method': 'lora', 'r': 8}})}\n"
        "  overrides: [{models: [tiny:bert], set: {peft: {method: lora, r: 2, target_modules: [query]}}}]\n"
        "  run_options: {report_to: tensorboard}\n")
    out = tmp_path / "out"
    assert vnr(["run", str(config), "--output", str(out), "--data-root", str(data_root), "--no-progress"]) == 0
    (spec,) = load_experiment(config, output=out).specs
    assert spec == FinetuneSpec("tiny:bert", "rte", 0, peft={"r": 2, "target_modules": ["query"]}, **SMALL)
    rec = RunStore(out).get(spec.run_id())
    assert rec["peft"]["target_modules"] == ["query"] and rec["peft"]["target_modules_source"] == "given"
    assert rec["peft"]["trainable_parameters"] == 2 * 2 * (64 + 64) + 130
    assert list((out / "logs" / spec.run_id()).glob("events.out.tfevents.*"))


def test_api_lora_resumes_from_its_adapter_checkpoint(data_root, tmp_path):
    """Stopped after step 8 (its later checkpoint and record removed), the run resumes and ends where an
    uninterrupted one does: same losses, same adapter and head weights."""
    from safetensors.torch import load_file

    import harness

    kwargs = {"data_root": data_root, "save_steps": 4, "keep_checkpoints": True, "peft": {"method": "lora"}, **SMALL}
    straight = harness.finetune("tiny:bert", "rte", 1, output=tmp_path / "a", **kwargs)
    rid = straight["run_id"]
    done = RunStore(tmp_path / "a").checkpoint_dir(rid)
    assert sorted(p.name for p in done.glob("checkpoint-*")) == ["checkpoint-12", "checkpoint-8"]
    assert (done / "checkpoint-8" / "adapter_model.safetensors").is_file()  # the adapters and head, not the base
    assert not (done / "checkpoint-8" / "model.safetensors").exists()
    stopped = RunStore(tmp_path / "b").checkpoint_dir(rid)  # a run stopped after step 8: its checkpoint, no record
    shutil.copytree(done / "checkpoint-8", stopped / "checkpoint-8")
    resumed = harness.finetune("tiny:bert", "rte", 1, output=tmp_path / "b", **kwargs)
    assert resumed["resumed_from"] == 8 and resumed["train"]["global_step"] == 12
    assert resumed["peft"] == straight["peft"]
    assert [r["eval_loss"] for r in resumed["history"]] == pytest.approx(
        [r["eval_loss"] for r in straight["history"]], abs=1e-6)
    ours = load_file(stopped / "checkpoint-12" / "adapter_model.safetensors")
    theirs = load_file(done / "checkpoint-12" / "adapter_model.safetensors")
    start = load_file(done / "checkpoint-8" / "adapter_model.safetensors")
    assert sorted(ours) == sorted(theirs) and any("classifier" in k for k in ours) and any("lora_A" in k for k in ours)
    for key in ours:
        assert torch.allclose(ours[key], theirs[key], atol=1e-6), key
    assert any(not torch.equal(ours[k], start[k]) for k in ours)  # steps 9-12 did train


# ---------------------------------------------------------------------- bad input
@pytest.mark.parametrize(("extra", "message"), [
    (["--peft-args", "r=4"], "--peft-args needs --peft lora"),
    (["--peft", "lora", "--peft-args", "r=0"], "--peft-args: r: 0 is below 1"),
    (["--peft", "lora", "--peft-args", "rank=4"], "--peft-args: unknown key 'rank'"),
    (["--report-to", "wandb"], "report_to: wandb is not installed: pip install wandb"),
    (["--report-to", "all"], "--report-to: 'all' is not a tracker"),
])
def test_cli_bad_input_exits_2_before_any_record(extra, message, data_root, tmp_path, capsys):
    out = tmp_path / "o"
    argv = ["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0", "--data-root", str(data_root),
            "--output", str(out), "--max-steps", "2", *extra, "--no-progress"]
    assert vnr(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err
    assert not (out / "runs").exists() or not any((out / "runs").iterdir())


def test_a_family_without_default_target_modules_is_refused(monkeypatch, data_root, tmp_path, capsys):
    from harness.finetune import adapters

    monkeypatch.delitem(TARGET_MODULES, "bert", raising=False)
    monkeypatch.setattr(adapters, "peft_target_modules", lambda: {})  # neither peft's table nor ours knows bert
    argv = ["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0", "--data-root", str(data_root),
            "--output", str(tmp_path / "o"), "--max-steps", "2", "--peft", "lora", "--no-progress"]
    assert vnr(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "no default target_modules for tiny:bert (model_type bert): give them" in err


def test_a_target_module_the_model_lacks_fails_naming_its_layers(data_root, tmp_path, capsys):
    argv = ["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0", "--data-root", str(data_root),
            "--output", str(tmp_path / "o"), "--max-steps", "2", "--max-train-samples", "8", "--peft", "lora",
            "--peft-args", "target_modules=q_proj+v_proj", "--no-progress"]
    assert vnr(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(
        "peft: tiny:bert has no layer named 'q_proj' (target_modules); its linear layers: classifier, dense, key, "
        "query, value"), err


def test_grid_config_refuses_bad_peft_naming_the_key(tmp_path):
    config = tmp_path / "grid.yaml"
    config.write_text("finetune: {models: [tiny:bert], tasks: [rte], hyperparameters: {peft: {r: 0}},"
                      " run_options: {report_to: comet}}\n")
    with pytest.raises(UserError, match=r"finetune.hyperparameters.peft: r: 0 is below 1"):
        load_experiment(config)
    config.write_text("finetune: {models: [tiny:bert], tasks: [rte], run_options: {report_to: comet}}\n")
    with pytest.raises(UserError, match=r"finetune.run_options.report_to: 'comet' is not a tracker"):
        load_experiment(config)


# ---------------------------------------------------------------------- bias scoring of a causal model
def test_bias_scoring_loads_a_causal_model_in_the_requested_dtype(llama_dir, data_root, tmp_path, monkeypatch):
    """bf16 asked: the weights are loaded as bf16 (no float32 copy first), and the record says so."""
    import transformers as tf

    from harness.bias import run_bias
    from harness.specs import BiasSpec

    loaded = []
    real = tf.AutoModelForCausalLM.from_pretrained.__func__

    def spy(cls, *args, **kwargs):  # the real loader; notes the dtype the weights arrive in
        model = real(cls, *args, **kwargs)
        loaded.append(next(model.parameters()).dtype)
        return model

    monkeypatch.setattr(tf.AutoModelForCausalLM, "from_pretrained", classmethod(spy))
    rec = run_bias(BiasSpec(str(llama_dir), "crows_pairs", limit=4, precision="bf16"), tmp_path, data_root=data_root,
                   progress=False)
    assert loaded == [torch.bfloat16]
    assert rec["status"] == "ok" and rec["scoring"]["dtype"] == "bfloat16" and rec["scoring"]["lm_kind"] == "causal"
    loaded.clear()
    run_bias(BiasSpec(str(llama_dir), "crows_pairs", limit=4), tmp_path, data_root=data_root, progress=False)
    assert loaded == [torch.float32]  # the default, fp32
