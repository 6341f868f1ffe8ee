"""Experiment configs: expansion of the shipped grids, run ids, overrides, selection, bad input."""

from __future__ import annotations

import doctest
import importlib
import re
from pathlib import Path

import pytest

from harness.grid.config import load_experiment, parse_experiment, parse_time_min, select_specs
from harness.specs import BiasSpec, FinetuneSpec
from ranking.floor.errors import UserError

REPO = Path(__file__).resolve().parents[1]
PAPER = REPO / "configs" / "experiments" / "paper.yaml"
SMOKE = REPO / "configs" / "experiments" / "smoke.yaml"
PAPER_MODELS = (
    "bert-base-uncased", "roberta-base", "albert-base-v2", "microsoft/deberta-base",
    "distilbert-base-uncased", "distilroberta-base", "gpt2",
)


def test_paper_grid_is_seven_models_by_glue_by_five_seeds_plus_bias():
    exp = load_experiment(PAPER)
    ft = [s for s in exp.specs if isinstance(s, FinetuneSpec)]
    bias = [s for s in exp.specs if isinstance(s, BiasSpec)]
    assert exp.models == PAPER_MODELS
    assert exp.axis("finetune", "tasks") == ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
    assert exp.axis("finetune", "seeds") == (0, 1, 2, 3, 4)
    assert len(ft) == 7 * 9 * 5 == 315
    assert len(bias) == 7 * 3 == 21
    # MNLI is one run per (model, seed), scored on matched and mismatched by the run itself
    assert sum(s.task == "mnli" for s in ft) == 7 * 5
    assert {(s.model, s.dataset) for s in bias} == {(m, d) for m in PAPER_MODELS
                                                   for d in ("crows_pairs", "stereoset", "winobias")}
    # the paper's recipe is FinetuneSpec's defaults: same run ids as a default spec
    assert ft[0] == FinetuneSpec("bert-base-uncased", "cola", 0)
    assert exp.label("microsoft/deberta-base") == "deberta-base"
    assert exp.slurm.time_min == 24 * 60 and exp.slurm.gpus == 1
    assert len({s.run_id() for s in exp.specs}) == 336


def test_smoke_grid_is_small_and_tiny():
    exp = load_experiment(SMOKE)
    assert all(s.model.startswith("tiny:") for s in exp.specs)
    assert len(exp.specs) == 2 * 2 * 2 + 2 * 3
    assert exp.axis("finetune", "seeds") == (0, 1)
    assert all(s.limit == 20 for s in exp.specs if isinstance(s, BiasSpec))
    assert exp.output == Path("results/smoke")
    assert load_experiment(SMOKE, output="/tmp/x").output == Path("/tmp/x")


def _doc(**finetune):
    return {"name": "t", "finetune": {"models": ["tiny:bert"], "tasks": ["rte"], "seeds": [0], **finetune}}


def test_changed_hyperparameter_changes_the_run_id_and_equal_numbers_do_not():
    base = parse_experiment(_doc()).specs[0]
    lr = parse_experiment(_doc(hyperparameters={"learning_rate": "3e-5"})).specs[0]  # YAML 1.1 reads 3e-5 as str
    same = parse_experiment(_doc(hyperparameters={"epochs": 5, "learning_rate": 2e-5})).specs[0]
    assert lr.learning_rate == 3e-5
    assert lr.run_id() != base.run_id()
    assert same.run_id() == base.run_id()  # epochs: 5 is the default 5.0


def test_overrides_apply_in_order_with_globs():
    exp = parse_experiment({
        "finetune": {
            "models": ["tiny:bert", "tiny:gpt2"], "tasks": ["rte", "cola"], "seeds": {"from": 0, "to": 1},
            "hyperparameters": {"batch_size": 8},
            "overrides": [
                {"models": ["*gpt2"], "set": {"learning_rate": 1e-4}},
                {"models": ["*gpt2"], "tasks": ["cola"], "seeds": [1], "set": {"learning_rate": 5e-4}},
            ],
        },
        "bias": {"datasets": ["crows_pairs", "winobias"], "options": {"limit": 10},
                 "overrides": [{"datasets": ["winobias"], "set": {"limit": 4}}]},
    })
    lrs = {(s.model, s.task, s.seed): s.learning_rate for s in exp.specs if isinstance(s, FinetuneSpec)}
    assert lrs[("tiny:bert", "rte", 0)] == 2e-5
    assert lrs[("tiny:gpt2", "rte", 1)] == 1e-4
    assert lrs[("tiny:gpt2", "cola", 0)] == 1e-4
    assert lrs[("tiny:gpt2", "cola", 1)] == 5e-4
    limits = {(s.model, s.dataset): s.limit for s in exp.specs if isinstance(s, BiasSpec)}
    assert limits == {("tiny:bert", "crows_pairs"): 10, ("tiny:bert", "winobias"): 4,
                      ("tiny:gpt2", "crows_pairs"): 10, ("tiny:gpt2", "winobias"): 4}
    # expansion order: models x tasks x seeds, then bias
    assert [(s.model, s.task, s.seed) for s in exp.specs[:4]] == [
        ("tiny:bert", "rte", 0), ("tiny:bert", "rte", 1), ("tiny:bert", "cola", 0), ("tiny:bert", "cola", 1)]


def test_only_patterns_select_by_run_id_model_task_pair_or_kind():
    exp = load_experiment(SMOKE)
    assert len(select_specs(exp.specs, None)) == 14
    assert len(select_specs(exp.specs, ["bias"])) == 6
    assert len(select_specs(exp.specs, ["tiny:gpt2/*"])) == 7
    assert len(select_specs(exp.specs, ["rte,winobias"])) == 4 + 2
    assert len(select_specs(exp.specs, ["*-s1-*"])) == 4
    one = exp.specs[3].run_id()
    assert [s.run_id() for s in select_specs(exp.specs, [one])] == [one]
    with pytest.raises(UserError, match="matches no run"):
        select_specs(exp.specs, ["nothing*"])


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"finetune": {"models": ["tiny:bert"], "tasks": ["rte"]}, "slrum": {}}, "unknown key 'slrum'"),
        ({"finetune": {"models": ["tiny:bert"], "tasks": ["sst-2"]}}, "unknown task 'sst-2'"),
        ({"finetune": {"models": [], "tasks": ["rte"]}}, "finetune.models is required"),
        ({"finetune": {"models": ["tiny:bert"], "tasks": ["rte"], "seeds": [0, 0]}}, "seed is listed twice"),
        ({"finetune": {"models": ["tiny:bert"], "tasks": ["rte"], "hyperparameters": {"lr": 1}}},
         "hyperparameters: unknown key 'lr'"),
        ({"finetune": {"models": ["tiny:bert"], "tasks": ["rte"], "hyperparameters": {"batch_size": "x"}}},
         "batch_size: 'x' is not a whole number"),
        ({"finetune": {"models": ["tiny:bert"], "tasks": ["rte"]}, "slurm": {"time": "soon"}}, "is not a time"),
        ({"bias": {"datasets": ["crows_pairs"]}}, "bias.models is required"),
        ({"bias": {"models": ["tiny:bert"], "datasets": ["crowspairs"]}}, "unknown bias dataset 'crowspairs'"),
        ({"finetune": {"models": ["tiny:bert"], "tasks": ["rte"]}, "labels": {"gpt2": "x"}}, "not a model"),
        ({}, "the grid is empty"),
        ([1, 2], "must be a mapping"),
    ],
)
def test_bad_configs_say_what_to_fix(doc, message):
    with pytest.raises(UserError, match=message):
        parse_experiment(doc, where="bad.yaml")


def test_unreadable_configs(tmp_path):
    with pytest.raises(UserError, match="no such file"):
        load_experiment(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("finetune: [unclosed\n")
    with pytest.raises(UserError, match="not valid YAML"):
        load_experiment(bad)


def test_time_limits():
    assert parse_time_min("04:00:00") == 240
    assert parse_time_min("1-00:00:00") == 1440
    assert parse_time_min("90") == 90
    assert parse_time_min("30:30") == 31  # MM:SS, rounded up
    assert parse_time_min("0:00:30") == 1  # seconds round up to a minute, as sbatch does (and the help says)
    assert parse_time_min(20) == 20
    with pytest.raises(UserError):
        parse_time_min(0)


@pytest.mark.parametrize("module", ["config", "local", "slurm", "collect"])
def test_docstring_examples(module):
    mod = importlib.import_module(f"harness.grid.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


_FT = "bad.yaml: finetune.hyperparameters"


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"hyperparameters": {"epochs": 0}}, f"{_FT}.epochs: 0 must be above 0"),
        ({"hyperparameters": {"epochs": float("nan")}}, f"{_FT}.epochs: nan is not a finite number"),
        ({"hyperparameters": {"batch_size": 0}}, f"{_FT}.batch_size: 0 is below 1"),
        ({"hyperparameters": {"learning_rate": float("inf")}}, f"{_FT}.learning_rate: inf is not a finite number"),
        ({"hyperparameters": {"learning_rate": -1e-5}}, f"{_FT}.learning_rate: -1e-05 must be above 0"),
        ({"hyperparameters": {"learning_rate": "fast"}}, f"{_FT}.learning_rate: 'fast' is not a number"),
        ({"hyperparameters": {"weight_decay": -0.1}}, f"{_FT}.weight_decay: -0.1 must be at least 0"),
        ({"hyperparameters": {"warmup_ratio": 1.5}}, f"{_FT}.warmup_ratio: 1.5 must be below 1"),
        ({"hyperparameters": {"max_length": 0}}, f"{_FT}.max_length: 0 is below 1"),
        ({"hyperparameters": {"max_steps": -3}}, f"{_FT}.max_steps: -3 is below 1"),
        ({"hyperparameters": {"max_train_samples": 2.5}}, f"{_FT}.max_train_samples: 2.5 is not a whole number"),
        ({"hyperparameters": {"precision": "fp8"}}, f"{_FT}.precision: 'fp8' is not one of auto, fp32, fp16, bf16"),
        ({"seeds": [-1]}, "bad.yaml: finetune.seeds[0]: -1 is below 0"),
        ({"seeds": [0, 2**32]}, "bad.yaml: finetune.seeds[1]: 4294967296 is above 4294967295"),
        ({"seeds": {"from": 0, "to": 10**9}}, "bad.yaml: finetune.seeds: 1000000001 seeds; a grid takes at most 10000"),
        ({"overrides": [{"tasks": ["rte"], "set": {"batch_size": -8}}]},
         "bad.yaml: finetune.overrides[0].set.batch_size: -8 is below 1"),
    ],
)
def test_every_hyperparameter_is_checked_at_load_naming_its_key(section, message):
    with pytest.raises(UserError) as info:
        parse_experiment({"finetune": {"models": ["tiny:bert"], "tasks": ["rte"], **section}}, where="bad.yaml")
    assert str(info.value).startswith(message), str(info.value)


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"bias": {"models": ["tiny:bert"], "options": {"limit": -3}}}, "bad.yaml: bias.options.limit: -3 is below 1"),
        ({"bias": {"models": ["tiny:bert"], "options": {"precision": "int8"}}}, "bias.options.precision: 'int8'"),
        ({"bias": {"models": ["tiny:bert"], "overrides": [{"datasets": ["winobias"], "set": {"limit": 0}}]}},
         "bias.overrides[0].set.limit: 0 is below 1"),
        ({"bias": {"models": ["tiny:bert"]}, "slurm": {"mem_gb": float("nan")}}, "slurm.mem_gb: nan is not a finite number"),
        ({"bias": {"models": ["tiny:bert"]}, "slurm": {"mem_gb": 0}}, "slurm.mem_gb: 0 must be above 0"),
        ({"bias": {"models": ["tiny:bert"]}, "slurm": {"mem_gb": 0.0004}}, "bad.yaml: slurm.mem_gb: 0.0004 GB is below "
         "1 MB, the least sbatch --mem takes (--mem=0 would mean all of a node's memory): give at least 0.001"),
        ({"bias": {"models": ["tiny:bert"]}, "slurm": {"cpus": -2}}, "slurm.cpus: -2 is below 1"),
        ({"bias": {"models": ["tiny:bert"]}, "slurm": {"gpus": -1}}, "slurm.gpus: -1 is below 0"),
        ({"bias": {"models": ["tiny:bert"]}, "slurm": {"array_parallelism": 0}}, "slurm.array_parallelism: 0"),
        ({"bias": {"models": ["tiny:bert"]}, "slurm": {"runs_per_gpu": 0}}, "slurm.runs_per_gpu: 0 is below 1"),
        ({"bias": {"models": ["tiny:bert"]}, "slurm": {"time": 10**9}}, "more than a year"),
        ({"bias": {"models": ["tiny:bert"]}, "local": {"runs_per_gpu": 0}}, "local.runs_per_gpu: 0 is below 1"),
        ({"bias": {"models": ["tiny:bert"]}, "local": {"gpus": [0, 0]}}, "local.gpus: give distinct GPU indices"),
        ({"bias": {"models": ["tiny:bert"]}, "local": {"gpu": 1}}, "local: unknown key 'gpu'"),
        ({"bias": {"models": [{"model": "tiny:bert"}]}}, "bias.models[0]: unknown key 'model'"),
        ({"bias": {"models": [{"name": "tiny:bert", "model_args": [1]}]}}, "bias.models[0].model_args must be a mapping"),
        ({"bias": {"models": ["tiny:bert", {"name": "tiny:bert"}]}}, "bias.models: 'tiny:bert' is listed twice"),
        ({"bias": {"models": ["tiny:bert"], "run_options": {"batch_tokens": 0}}}, "bias.run_options.batch_tokens: 0"),
        ({"finetune": {"models": ["tiny:bert"], "tasks": ["rte"], "run_options": {"save_steps": -5}}},
         "finetune.run_options.save_steps: -5 is below 1"),
        ({"finetune": {"models": ["tiny:bert"], "tasks": ["rte"], "run_options": {"keep_checkpoints": "no"}}},
         "finetune.run_options.keep_checkpoints: 'no' is not true or false"),
    ],
)
def test_bias_options_and_resources_are_checked_at_load(doc, message):
    with pytest.raises(UserError, match=re.escape(message)):
        parse_experiment(doc, where="bad.yaml")


def test_a_grid_preset_sets_the_default_bias_scoring():
    bias = {"models": ["tiny:bert"], "datasets": ["crows_pairs", "winobias"]}
    plain = parse_experiment({"name": "t", "bias": bias})
    assert plain.preset == "default" and {s.scoring for s in plain.specs} == {"default"}
    voted = parse_experiment({"name": "t", "preset": "votenrank", "bias": bias})
    assert voted.preset == "votenrank" and {s.scoring for s in voted.specs} == {"votenrank"}
    # the reference runs are other runs (scoring is in their identity); default runs keep their old ids
    assert {s.run_id() for s in voted.specs}.isdisjoint(s.run_id() for s in plain.specs)
    assert plain.specs[0].run_id() == BiasSpec("tiny:bert", "crows_pairs").run_id()
    assert "scoring" not in plain.specs[0].identity() and voted.specs[0].identity()["scoring"] == "votenrank"
    # an explicit option or override wins over the preset
    mixed = parse_experiment({"name": "t", "preset": "votenrank", "bias": {
        **bias, "overrides": [{"datasets": ["winobias"], "set": {"scoring": "default"}}]}})
    assert [s.scoring for s in mixed.specs] == ["votenrank", "default"]
    own = parse_experiment({"name": "t", "preset": "votenrank", "bias": {**bias, "options": {"scoring": "default"}}})
    assert {s.scoring for s in own.specs} == {"default"}
    # the shipped paper grid follows the published conventions
    paper = load_experiment(PAPER)
    assert paper.preset == "votenrank" and {s.scoring for s in paper.specs if isinstance(s, BiasSpec)} == {"votenrank"}


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"preset": "paper"}, "bad.yaml: preset: 'paper' is not one of default, votenrank"),
        ({"bias": {"models": ["tiny:bert"], "options": {"scoring": "published"}}},
         "bias.options.scoring: 'published' is not one of default, reference, votenrank"),
        ({"preset": "votenrank", "bias": {"models": ["tiny:bert"], "overrides": [{"set": {"scoring": 1}}]}},
         "bias.overrides[0].set.scoring: 1 is not one of default, reference, votenrank"),
    ],
)
def test_bad_presets_and_scoring_modes_name_their_key(doc, message):
    doc = {"name": "t", "bias": {"models": ["tiny:bert"]}, **doc}
    with pytest.raises(UserError, match=re.escape(message)):
        parse_experiment(doc, where="bad.yaml")


def test_models_as_mappings_and_the_local_section():
    exp = parse_experiment({
        "finetune": {"models": [{"name": "tiny:bert"}, "tiny:gpt2"], "tasks": ["rte"]},
        "local": {"runs_per_gpu": 4, "gpus": "0,2"},
        "slurm": {"runs_per_gpu": 8},
    })
    assert exp.models == ("tiny:bert", "tiny:gpt2")
    assert exp.specs[0] == FinetuneSpec("tiny:bert", "rte", 0)  # a mapping without model_args is the plain id
    assert exp.local.runs_per_gpu == 4 and exp.local.gpus == (0, 2)
    assert exp.slurm.runs_per_gpu == 8
    # the default: None, i.e. auto (calibrated) where runs get a GPU, else 1 (harness.grid.calibrate.resolve_packing)
    assert parse_experiment(_doc()).local.gpus is None and parse_experiment(_doc()).local.runs_per_gpu is None
    assert parse_experiment(_doc()).slurm.runs_per_gpu is None


def test_runs_per_gpu_auto_and_the_calibration_keys():
    exp = parse_experiment({**_doc(), "local": {"runs_per_gpu": "auto", "calibrate": False},
                            "slurm": {"runs_per_gpu": "AUTO", "calibration_budget_s": 90}})
    assert exp.local.runs_per_gpu == "auto" and exp.local.calibrate is False and exp.local.calibration_budget_s is None
    assert exp.slurm.runs_per_gpu == "auto" and exp.slurm.calibration_budget_s == 90.0 and exp.slurm.calibrate is True
    for section, value, message in [
        ("local", {"runs_per_gpu": "many"}, "local.runs_per_gpu: 'many' is neither auto nor a whole number"),
        ("slurm", {"runs_per_gpu": 2.5}, "slurm.runs_per_gpu: 2.5 is not a whole number"),
        ("local", {"calibrate": "no"}, "local.calibrate: 'no' is not true or false"),
        ("slurm", {"calibration_budget_s": -1}, "slurm.calibration_budget_s: -1 must be above 0"),
        ("local", {"calibration_budget_s": 0}, "local.calibration_budget_s: 0 must be above 0"),
        ("local", {"runs_per_gpu": 65}, "local.runs_per_gpu: 65 is above 64"),
        ("slurm", {"runs_per_gpu": "0"}, "slurm.runs_per_gpu: 0 is below 1"),
    ]:
        with pytest.raises(UserError, match=re.escape(message)):
            parse_experiment({**_doc(), section: value})


def test_model_args_reach_the_spec_where_specs_take_them():
    doc = {"bias": {"models": [{"name": "tiny:bert", "model_args": {"dtype": "float32"}}], "datasets": ["winobias"]}}
    assert parse_experiment(doc).specs[0].model_args == (("dtype", "float32"),)
    doc["bias"]["models"][0]["model_args"] = {"revison": "main"}  # a typo is named, at load
    with pytest.raises(UserError, match="unknown model argument 'revison'"):
        parse_experiment(doc)


def test_precisions_are_the_ones_the_runs_accept():
    from harness.bias.scoring import PRECISIONS as BIAS
    from harness.finetune.train import PRECISIONS as FINETUNE
    from harness.specs import PRECISIONS

    assert set(PRECISIONS) == set(FINETUNE) == set(BIAS)


@pytest.mark.parametrize("module", ["harness.schema", "ranking.floor.schema"])
def test_schema_docstring_examples(module):
    import importlib

    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


_TWO = {"name": "b", "bias": {"models": ["tiny:bert", "tiny:gpt2"], "datasets": ["crows_pairs"]}}


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        ({"tiny:bert": "tiny:gpt2"}, "base.yaml: labels: 'tiny:bert': 'tiny:gpt2' is the name of another model of this "
         "grid; matrix.csv would mix up their rows: give 'tiny:bert' another label"),
        ({"tiny:bert": "tiny:gpt2", "tiny:gpt2": "tiny:bert"}, "base.yaml: labels: 'tiny:bert': 'tiny:gpt2' is the "
         "name of another model of this grid; matrix.csv would mix up their rows: give 'tiny:bert' another label"),
        ({"tiny:bert": "A", "tiny:gpt2": "A"}, "base.yaml: labels: 'tiny:bert' and 'tiny:gpt2' share the label 'A': "
         "their rows in matrix.csv would merge; give each model its own label"),
        ({"tiny:bert": ""}, "base.yaml: labels.tiny:bert is empty: give the model's row name in matrix.csv, or leave "
         "the model out of labels:"),
        ({"tiny:bert": " "}, "base.yaml: labels.tiny:bert is empty: give the model's row name in matrix.csv, or leave "
         "the model out of labels:"),
        ({"tiny:bert": "A "}, "base.yaml: labels.tiny:bert: 'A ' has spaces at its ends: write 'A'"),
    ],
)
def test_labels_that_would_merge_or_blank_a_row_are_refused(labels, message):
    with pytest.raises(UserError) as info:
        parse_experiment({**_TWO, "labels": labels}, where="base.yaml")
    assert str(info.value) == message


def test_a_label_may_be_the_models_own_name():
    exp = parse_experiment({**_TWO, "labels": {"tiny:bert": "tiny:bert", "tiny:gpt2": "gpt"}})
    assert [exp.label(m) for m in exp.models] == ["tiny:bert", "gpt"]


_FT_ONE = {"models": ["tiny:bert"], "tasks": ["rte"], "seeds": [0]}
_BIAS_ONE = {"models": ["tiny:bert"], "datasets": ["crows_pairs"]}


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"finetune": {**_FT_ONE, "overrides": [{"models": ["tiny:bret"], "set": {"epochs": 2}}]}},
         "base.yaml: finetune.overrides[0].models: 'tiny:bret' matches no model of the fine-tuning runs (tiny:bert): "
         "fix or remove it"),
        ({"finetune": {**_FT_ONE, "overrides": [{"tasks": ["RTE"], "set": {"epochs": 2}}]}},
         "base.yaml: finetune.overrides[0].tasks: 'RTE' matches no task of the fine-tuning runs (rte); globs are "
         "case-sensitive: fix or remove it"),
        ({"finetune": {**_FT_ONE, "overrides": [{"set": {"epochs": 2}}, {"seeds": [0, 7], "set": {"epochs": 3}}]}},
         "base.yaml: finetune.overrides[1].seeds: '7' matches no seed of the fine-tuning runs (0): fix or remove it"),
        ({"finetune": {**_FT_ONE, "overrides": [{"models": [], "set": {"epochs": 2}}]}},
         "base.yaml: finetune.overrides[0].models: an empty list selects no run: list globs, or leave the key out to "
         "select every run"),
        ({"bias": {**_BIAS_ONE, "overrides": [{"models": ["nomatch*"], "set": {"limit": 2}}]}},
         "base.yaml: bias.overrides[0].models: 'nomatch*' matches no model of the bias runs (tiny:bert): fix or "
         "remove it"),
        ({"bias": {**_BIAS_ONE, "overrides": [{"datasets": ["stereo*"], "set": {"limit": 2}}]}},
         "base.yaml: bias.overrides[0].datasets: 'stereo*' matches no dataset of the bias runs (crows_pairs): fix or "
         "remove it"),
        ({"bias": {**_BIAS_ONE, "overrides": [{"datasets": [], "set": {"limit": 2}}]}},
         "base.yaml: bias.overrides[0].datasets: an empty list selects no run: list globs, or leave the key out to "
         "select every run"),
    ],
)
def test_an_override_glob_that_matches_no_run_is_refused(section, message):
    with pytest.raises(UserError) as info:
        parse_experiment({"name": "b", **section}, where="base.yaml")
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("finetune", "message"),
    [
        ({"run_options": {"optim": "sgdx"}}, "base.yaml: finetune.run_options.optim: 'sgdx' is not an optimizer "
         "transformers knows: did you mean sgd? (all: transformers.training_args.OptimizerNames)"),
        ({"run_options": {"optim": "nope"}}, "base.yaml: finetune.run_options.optim: 'nope' is not an optimizer "
         "transformers knows: use e.g. adamw_torch, adamw_torch_fused, sgd or adafactor (all: "
         "transformers.training_args.OptimizerNames)"),
        ({"hyperparameters": {"padding": "flatten"}}, "base.yaml: finetune.hyperparameters.padding (tiny:deberta): "
         "padding flatten is not supported for model_type deberta in sequence classification: "),
        ({"overrides": [{"set": {"padding": "bucket"}}, {"models": ["*deberta"], "set": {"padding": "flatten"}}]},
         "base.yaml: finetune.overrides[1].set.padding (tiny:deberta): padding flatten is not supported for "
         "model_type deberta in sequence classification: "),
    ],
)
def test_run_time_refusals_of_optim_and_padding_come_at_load(finetune, message):
    """What each run would refuse once the grid has started (an unknown optimizer, a layout the family cannot
    compute) is refused when the config is read, by the same checks."""
    doc = {"name": "b", "finetune": {"models": ["tiny:deberta", "tiny:gpt2"], "tasks": ["rte"], **finetune}}
    with pytest.raises(UserError) as info:
        parse_experiment(doc, where="base.yaml")
    assert str(info.value).startswith(message) and str(info.value).endswith("use padding: auto or bucket"
                                                                          if "padding" in message else "")
    ok = parse_experiment({"finetune": {"models": ["tiny:bert", "tiny:gpt2"], "tasks": ["rte"],
                                        "run_options": {"optim": "sgd"}, "hyperparameters": {"padding": "bucket"}}})
    assert ok.run_options["finetune"] == {"optim": "sgd"} and {s.padding for s in ok.specs} == {"bucket"}
    both_flat = parse_experiment({"finetune": {"models": ["tiny:bert", "tiny:gpt2"], "tasks": ["rte"],
                                               "hyperparameters": {"padding": "flatten"}}})  # harness.finetune.flat
    assert {(s.model, s.padding) for s in both_flat.specs} == {("tiny:bert", "flatten"), ("tiny:gpt2", "flatten")}


def test_a_local_checkpoint_without_weights_or_tokenizer_is_refused_at_load(tmp_path):
    # passed --dry-run before; each run then failed to load it (and recorded nothing, so status said "missing")
    from harness.models import _auto_class, tiny_config, train_tiny_tokenizer

    tok = train_tiny_tokenizer("bert", ["the quick brown fox", "a man walks"] * 4, vocab_size=100)
    folder = tmp_path / "ckpt"
    _auto_class("masked_lm").from_config(tiny_config("bert", tok)).save_pretrained(folder)
    doc = {"name": "x", "finetune": {"models": [str(folder)], "tasks": ["rte"], "seeds": [0]},
           "bias": {"datasets": ["crows_pairs"]}}
    with pytest.raises(UserError, match=re.escape(f"config: finetune.models ({folder}): model directory {folder} "
                                                  "has no tokenizer files")):
        parse_experiment(doc)
    tok.save_pretrained(folder)
    assert len(parse_experiment(doc).specs) == 2
    (folder / "model.safetensors").unlink()
    with pytest.raises(UserError, match=re.escape(f"config: finetune.models ({folder}): model directory {folder} "
                                                  "has no weight file")):
        parse_experiment(doc)
    del doc["finetune"]
    doc["bias"]["models"] = [str(folder)]
    with pytest.raises(UserError, match=re.escape(f"config: bias.models ({folder}): model directory")):
        parse_experiment(doc)
