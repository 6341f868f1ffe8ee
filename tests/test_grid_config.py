"""Experiment configs: expansion of the shipped grids, run ids, overrides, selection, bad input."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

from harness.grid.config import load_experiment, parse_experiment, parse_time_min, select_specs
from harness.specs import BiasSpec, FinetuneSpec
from ranking.errors import UserError

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
    assert exp.tasks == ("cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte", "wnli")
    assert exp.seeds == (0, 1, 2, 3, 4)
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
    assert exp.seeds == (0, 1)
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
         "unknown option 'lr'"),
        ({"finetune": {"models": ["tiny:bert"], "tasks": ["rte"], "hyperparameters": {"batch_size": "x"}}},
         "batch_size: 'x' is not a whole number"),
        ({"finetune": {"models": ["tiny:bert"], "tasks": ["rte"]}, "slurm": {"time": "soon"}}, "is not a time"),
        ({"bias": {"datasets": ["crows_pairs"]}}, "bias.models is required"),
        ({"bias": {"models": ["tiny:bert"], "datasets": ["crowspairs"]}}, "unknown dataset 'crowspairs'"),
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
    assert parse_time_min(20) == 20
    with pytest.raises(UserError):
        parse_time_min(0)


@pytest.mark.parametrize("module", ["config", "local", "slurm", "collect"])
def test_docstring_examples(module):
    mod = importlib.import_module(f"harness.grid.{module}")
    result = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
