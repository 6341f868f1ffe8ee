"""``compile: auto | on | off`` (harness.finetune.compilation): a compiled training step through the Trainer.

* Exactness (slow: one real ``torch.compile`` on the CPU, inductor): a tiny BERT from a config (hidden 32, 2
  layers, dropout off, fp32), 6 Trainer steps compiled and eager: the same training losses and final
  predictions within the tolerance measured below (the compile takes about a minute on 2 shared
  cores).
* The mechanism, without compiling: the option is declared, validated and in the run id only when explicit;
  ``auto`` is eager on a CPU ("not measured: CPU") and takes the calibration's measurement on a GPU; an explicit
  ``on`` reaches ``TrainingArguments(torch_compile=True)`` and the record says what was used; the calibration
  table says compile was not measured on a CPU, and on a GPU measures it beside the chosen setting (bursts
  stood in) or says it was skipped for budget.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.finetune.compilation import COMPILE_OPTIONS, CPU_NOTE, choose_compile
from harness.specs import FinetuneSpec
from ranking.floor.errors import UserError

# Measured (torch 2.13 CPU, inductor, transformers 5.24; this test's model, data and 6 steps): the largest
# relative difference of a step's training loss between compiled and eager was 8.6e-08 (one float32 ulp at
# 0.69), of a final logit 1.9e-07 relative to the largest logit (the predictions come from the trained weights:
# the Trainer predicts with its plain module). The tolerances sit just above: 3e-7 and 5e-7. An exact result
# would be luck: inductor fuses and reorders the float reductions.
LOSS_RTOL = 3e-7
LOGIT_RTOL = 5e-7
STEPS = 6


def _trainer(compile_: str, tmp_path: Path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from harness.finetune.compilation import training_arguments

    torch.manual_seed(0)
    config = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                     intermediate_size=64, max_position_embeddings=32, num_labels=2,
                                     hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                     classifier_dropout=0.0)
    model = transformers.BertForSequenceClassification(config).float()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(1, 64, (STEPS * 4, 16), generator=g)
    labels = torch.randint(0, 2, (STEPS * 4,), generator=g)
    data = [{"input_ids": ids[i], "attention_mask": torch.ones(16, dtype=torch.long), "labels": labels[i]}
            for i in range(len(ids))]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / compile_), per_device_train_batch_size=4, per_device_eval_batch_size=8,
        max_steps=STEPS, learning_rate=1e-3, logging_steps=1, save_strategy="no", report_to=[], use_cpu=True,
        seed=0, data_seed=0, full_determinism=True, disable_tqdm=True,
        **training_arguments(choose_compile(compile_, "cpu")))
    from harness.finetune.callbacks import TokenAccountingCallback

    return transformers.Trainer(model=model, args=args, train_dataset=data, eval_dataset=data[:8],
                                callbacks=[TokenAccountingCallback()])  # its forward hook: under compile too


@pytest.mark.slow
def test_a_compiled_training_step_gives_the_eager_losses_and_predictions(tmp_path):
    import torch

    from harness.finetune.callbacks import TokenAccountingCallback

    runs, counted = {}, {}
    torch._dynamo.utils.counters.clear()
    for compile_ in ("off", "on"):
        trainer = _trainer(compile_, tmp_path)
        assert trainer.args.torch_compile == (compile_ == "on")
        trainer.train()
        compiled = trainer.model_wrapped is not trainer.model
        assert compiled == (compile_ == "on")  # accelerate wrapped the trained model in torch.compile
        losses = [e["loss"] for e in trainer.state.log_history if "loss" in e]
        runs[compile_] = losses, trainer.predict(trainer.eval_dataset).predictions
        accounting = next(c for c in trainer.callback_handler.callbacks if isinstance(c, TokenAccountingCallback))
        counted[compile_] = {k: accounting.result()[k] for k in ("samples", "real_tokens", "computed_tokens")}
    assert counted["on"] == counted["off"] == {"samples": 4 * STEPS, "real_tokens": 64 * STEPS,
                                               "computed_tokens": 64 * STEPS}
    # dynamo compiled a few frames once (measured: 3, 2 graphs), not one per step: the token accounting's forward
    # hook runs eager (traced, its counters changed every step and each step recompiled)
    assert torch._dynamo.utils.counters["frames"]["total"] < STEPS
    (eager, eager_logits), (comp, comp_logits) = runs["off"], runs["on"]
    assert len(eager) == len(comp) == STEPS
    assert comp == pytest.approx(eager, rel=LOSS_RTOL, abs=0)
    scale = float(abs(eager_logits).max())
    assert float(abs(comp_logits - eager_logits).max()) <= LOGIT_RTOL * scale


# ---------------------------------------------------------------------- the mechanism (no compiling)
def test_the_option_is_declared_validated_and_in_the_run_id_only_when_explicit():
    from typing import get_args

    from harness.specs import Compile

    assert get_args(Compile) == COMPILE_OPTIONS
    base = FinetuneSpec("tiny:bert", "rte", 0)
    assert base.compile == "auto" and "compile" not in base.identity()  # auto: the run ids of before the option
    ids = {c: FinetuneSpec("tiny:bert", "rte", 0, compile=c).run_id() for c in COMPILE_OPTIONS}
    assert ids["auto"] == base.run_id() and len(set(ids.values())) == 3
    with pytest.raises(UserError, match="compile: 'yes' is not one of auto, on, off"):
        FinetuneSpec("tiny:bert", "rte", 0, compile="yes")
    with pytest.raises(UserError, match="compile 'yes': use one of auto, on, off"):
        choose_compile("yes")


def test_auto_is_eager_on_a_cpu_and_follows_the_calibration_on_a_gpu():
    assert choose_compile("auto", "cpu", calibrated="on") == {
        "mode": "eager", "requested": "auto", "chosen_by": "default", "reason": CPU_NOTE}
    assert choose_compile("auto", "cuda", calibrated="on") == {
        "mode": "compiled", "requested": "auto", "chosen_by": "calibration"}
    assert choose_compile("auto", "cuda", calibrated="off")["chosen_by"] == "calibration"
    assert choose_compile("auto", "cuda")["chosen_by"] == "default"
    assert choose_compile("on", "cpu")["mode"] == "compiled"  # an explicit on is honoured on any device
    assert choose_compile("off", "cuda", calibrated="on")["mode"] == "eager"


def _sst2_root(root: Path) -> Path:
    folder = root / "glue" / "SST-2"
    folder.mkdir(parents=True)
    (folder / "train.tsv").write_text("sentence\tlabel\ngood\t1\nvery bad\t0\nnot very good\t1\na bad one\t0\n")
    (folder / "dev.tsv").write_text("sentence\tlabel\ngood\t1\nbad\t0\n")
    return root


@pytest.mark.slow
def test_an_explicit_on_reaches_training_arguments_and_the_record_and_auto_stays_eager_on_a_cpu(tmp_path,
                                                                                                 monkeypatch):
    """Through run_finetune: ``TrainingArguments.torch_compile`` as chosen (the Trainer's compile is stood in by
    the eager model: no compile runs here), the record's ``settings.compile`` and ``hyperparameters``; then
    ``auto`` under a calibration that says ``on``: eager on this CPU (its TrainingArguments are built, then the
    run is stopped: training it again would add nothing)."""
    import transformers

    from harness.finetune import run_finetune

    seen = []
    real_init = transformers.Trainer.__init__

    class Stop(Exception):
        pass

    def init(self, *args, **kwargs):
        seen.append(kwargs["args"].torch_compile)
        if len(seen) > 1:
            raise Stop
        kwargs["args"].torch_compile = False  # what the Trainer would compile: trained eager here
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(transformers.Trainer, "__init__", init)
    root = _sst2_root(tmp_path / "data")
    spec = FinetuneSpec("tiny:bert", "sst2", 0, epochs=1, batch_size=2, compile="on")
    rec = run_finetune(spec, tmp_path / "out", data_root=root, progress=False, track_efficiency=False)
    assert seen == [True]
    assert rec["settings"]["compile"] == {"mode": "compiled", "requested": "on", "chosen_by": "the spec"}
    assert rec["hyperparameters"]["compile"] == "on" and rec["run_id"] == spec.run_id()
    cal = {"file": "calibration/cpu-x.json", "device_kind": "cpu-x", "shape": "s", "runs_per_gpu": 1,
           "precision": "fp32", "compile": "on"}
    with pytest.raises(Stop):
        run_finetune(FinetuneSpec("tiny:bert", "sst2", 0, epochs=1, batch_size=2), tmp_path / "out", data_root=root,
                     progress=False, track_efficiency=False, calibration=cal)
    assert seen == [True, False]  # auto on a CPU: eager, whatever the calibration file says


# ---------------------------------------------------------------------- the calibration (bursts stood in)
def _stand_in_bursts(monkeypatch, compiled_rate: float, compile_wall_s: float = 80.0) -> list:
    """``run_burst`` stood in: eager rates per layout and precision, ``compiled_rate`` for a compiled burst, every
    burst 10 timed seconds; the eager ones 30 s of wall time, the compiled one ``compile_wall_s`` (its compile in
    the warm-up). Returns the bursts asked for, as (padding, compile, N, precision)."""
    import harness.grid.calibrate as cal

    asked = []
    eager = {("bucket", "fp32"): 100.0, ("flatten", "fp32"): 120.0, ("flatten", "bf16"): 150.0}

    def burst(spec, n, precision, **kw):
        asked.append((spec.padding, spec.compile, n, precision))
        rate = compiled_rate if spec.compile == "on" else eager.get((spec.padding, precision), 90.0) * (1 + 0.01 * n)
        return {"n": n, "precision": precision, "status": "measured", "samples_s": rate,
                "window_samples_s": [rate] * 3, "seconds": 10.0, "timed_samples": int(rate * 10),
                "wall_s": compile_wall_s if spec.compile == "on" else 30.0, "utilisation_pct": None,
                "power_w": None, "peak_memory_bytes": 2**30, "threads_per_run": None, "tf32": True,
                "model_parameters": 1, "losses": [[10, 0.69], [20, 0.68]]}

    monkeypatch.setattr(cal, "run_burst", burst)
    return asked


def _gpu():
    from harness.grid.calibrate import Device

    return Device("nvidia-test", "cuda", "NVIDIA test", 80 * 2**30, 16, bf16=True)


def test_the_calibration_does_not_measure_compile_on_a_cpu_and_says_so(monkeypatch):
    from harness.grid.calibrate import Calibration, Device, Limits, calibrate, format_table

    asked = _stand_in_bursts(monkeypatch, compiled_rate=1000.0)
    cpu = Device("cpu-test-2", "cpu", "test CPU", 8 * 2**30, 2)
    doc, _ = calibrate(FinetuneSpec("tiny:bert", "rte", 0), device=cpu, grid_samples_total=10**9,
                       limits=Limits(candidates=(1, 2), budget_cap_s=600))
    assert all(c == "auto" for _, c, _, _ in asked)  # no compiled burst
    assert doc["compile"] == {"status": "not measured", "note": "not measured: CPU", "rows": []}
    assert "compile" not in doc["chosen"]
    table = format_table(Calibration(Path("calibration/cpu-test-2.json"), "k", doc))
    assert "compile auto: not measured: CPU" in table.splitlines()


@pytest.mark.parametrize("compiled_rate, chosen", [(400.0, "on"), (160.0, "off")])
def test_the_calibration_measures_compile_at_the_chosen_setting_on_a_gpu(monkeypatch, compiled_rate, chosen):
    """At the chosen layout (flatten), N and precision (bf16): one compiled burst; ``on`` only where a run with
    its compile time (50 s more untimed wall time than eager) still ends sooner. RTE x 5 epochs = 12450 samples
    at N = 2: eager ~81 s; compiled at 400 samples/s 62 + 50 s (on); at 160 samples/s 156 + 50 s (off)."""
    from harness.grid.calibrate import Calibration, Limits, calibrate, calibration_ref, format_table

    asked = _stand_in_bursts(monkeypatch, compiled_rate=compiled_rate)
    doc, bursts = calibrate(FinetuneSpec("tiny:bert", "rte", 0), device=_gpu(), grid_samples_total=10**9,
                            limits=Limits(candidates=(1, 2), budget_cap_s=600))
    best = (doc["chosen"]["runs_per_gpu"], doc["chosen"]["precision"])
    assert best == (2, "bf16")
    assert [a for a in asked if a[1] == "on"] == [("flatten", "on", 2, "bf16")]  # once, at the chosen setting
    assert doc["compile"]["status"] == "measured" and doc["compile"]["compile_s"] == 50.0
    assert doc["compile"]["chosen"] == doc["chosen"]["compile"] == chosen
    assert bursts == len(asked)  # the compiled burst is counted with the others
    cal = Calibration(Path("calibration/nvidia-test.json"), "k", doc)
    assert calibration_ref(cal)["compile"] == chosen
    table = format_table(cal)
    assert f"compile auto: compiled {compiled_rate:.1f} against eager " in table and f"chosen: {chosen}" in table
    assert choose_compile("auto", "cuda", calibrated=calibration_ref(cal)["compile"])["mode"] == (
        "compiled" if chosen == "on" else "eager")


def test_a_compile_burst_the_budget_cannot_hold_is_skipped_for_budget(monkeypatch):
    from harness.grid.calibrate import Calibration, Limits, calibrate, format_table

    asked = _stand_in_bursts(monkeypatch, compiled_rate=1000.0)
    doc, _ = calibrate(FinetuneSpec("tiny:bert", "rte", 0), device=_gpu(), grid_samples_total=10**9,
                       limits=Limits(candidates=(1, 2), budget_cap_s=100))  # eager 30 s + 90 s estimate > 100 s
    assert all(c == "auto" for _, c, _, _ in asked)
    assert doc["compile"]["status"] == "skipped" and doc["compile"]["note"].startswith("skipped for budget: ")
    assert doc["compile"]["rows"][0]["reason"].startswith("budget: ") and "compile" not in doc["chosen"]
    table = format_table(Calibration(Path("calibration/nvidia-test.json"), "k", doc))
    assert "compile auto: skipped for budget: " in table


def test_an_explicit_compile_is_not_measured_and_names_its_calibration_shape():
    from harness.grid.calibrate import measure_compile, shape_key

    spec = FinetuneSpec("tiny:bert", "rte", 0, compile="off")
    assert measure_compile(spec, _gpu(), [], None, time_left=600)["note"] == "not measured: the spec fixes compile off"
    assert shape_key(spec).endswith(",compile=off") and "compile" not in shape_key(FinetuneSpec("tiny:bert", "rte", 0))


def test_vnr_finetune_refuses_an_unknown_compile_in_one_line_and_writes_nothing(tmp_path, capsys):
    from harness.cli import main

    out = tmp_path / "out"
    code = main(["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0", "--compile", "yes",
                 "--output", str(out), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == ["vnr finetune: error: --compile: 'yes' is not one of auto, on, off"]
    assert not out.exists()


def test_fixed_n_and_precision_still_measure_compile_auto_on_a_gpu(monkeypatch, tmp_path):
    """``runs_per_gpu: 4`` and ``precision: fp32`` leave compile ``auto`` to measure on a GPU: the calibration runs
    (N = 4, fp32, then the compiled burst); with ``compile: off`` too, nothing is left and nothing runs."""
    from harness.grid.calibrate import resolve_packing

    asked = _stand_in_bursts(monkeypatch, compiled_rate=1000.0)
    spec = FinetuneSpec("tiny:bert", "rte", 0, precision="fp32", padding="bucket")
    plan = resolve_packing([spec], tmp_path, runs_per_gpu=4, gpus=[0], device=_gpu(), samples=10**9)
    assert asked == [("bucket", "auto", 4, "fp32"), ("bucket", "on", 4, "fp32")]
    assert plan.runs_per_gpu == 4 and plan.options(spec)["calibration"]["compile"] == "on"
    fixed = resolve_packing([FinetuneSpec("tiny:bert", "rte", 0, precision="fp32", compile="off")], tmp_path / "b",
                            runs_per_gpu=4, gpus=[0], device=_gpu())
    assert fixed.calibration is None and len(asked) == 2
