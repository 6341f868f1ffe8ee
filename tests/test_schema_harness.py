"""The harness's inputs are declared schemas, validated once where they enter (issue 20, item 1).

A grid config, the flags of ``vnr finetune`` / ``vnr bias`` / ``vnr run`` and the arguments of the Python API
build the same objects through the same declarations; bad input is one line (exit 2 from the CLI), before
anything is written. Property tests mutate the shipped configs and API calls and check that every outcome is
a valid result or a one-line :class:`UserError`, never another exception.
"""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import yaml
from hang_bound import HANG_S

from harness.grid.config import LocalSettings, SlurmSettings, config_json_schema, parse_experiment
from harness.specs import BiasSpec, FinetuneRunOptions, FinetuneSpec
from ranking.floor.errors import UserError

REPO = Path(__file__).resolve().parents[1]
PAPER = REPO / "configs" / "experiments" / "paper.yaml"
SMOKE = REPO / "configs" / "experiments" / "smoke.yaml"
GRID = {"finetune": {"models": ["tiny:bert"], "tasks": ["rte"], "seeds": [0]}}
BIAS = {"bias": {"models": ["tiny:bert"], "datasets": ["winobias"]}}


def vnr(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "harness", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=HANG_S)


def one_line_exit_2(proc: subprocess.CompletedProcess) -> str:
    err = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


# ---------------------------------------------------------------------------- one declaration, every entry
def test_cli_config_and_api_build_the_same_spec():
    from harness.cli import build_parser
    from harness.finetune.cli import spec_from_args

    args = build_parser("finetune").parse_args(
        ["finetune", "--model", "tiny:bert", "--task", "RTE", "--seed", "3", "--lr", "3e-5", "--epochs", "2",
         "--max-length", "64", "--precision", "fp32"])
    from_flags = spec_from_args(args)
    from_config = parse_experiment({"finetune": {"models": ["tiny:bert"], "tasks": ["rte"], "seeds": [3],
                                                 "hyperparameters": {"learning_rate": "3e-5", "epochs": 2,
                                                                     "max_length": 64.0, "precision": "fp32"}}}).specs[0]
    from_api = FinetuneSpec.from_mapping({"model": "tiny:bert", "task": "rte", "seed": 3, "learning_rate": 3e-5,
                                          "epochs": 2.0, "max_length": 64, "precision": "fp32"})
    assert from_flags == from_config == from_api
    assert from_flags.run_id() == from_config.run_id() == from_api.run_id()


def test_the_config_sections_are_derived_from_the_declarations():
    from harness.grid.schema import LocalSection, SlurmSection
    from harness.kinds import get_kind

    Hyperparameters, BiasOptions = (get_kind(k).grid_section().options_model(get_kind(k)) for k in ("finetune", "bias"))
    naming = {"model", "task", "seed", "model_args"}
    assert set(Hyperparameters.model_fields) == {f.name for f in fields(FinetuneSpec)} - naming
    assert set(BiasOptions.model_fields) == {f.name for f in fields(BiasSpec)} - {"model", "dataset", "model_args"}
    assert set(SlurmSection.model_fields) == {f.name for f in fields(SlurmSettings)} - {"time_min"} | {"time"}
    assert set(LocalSection.model_fields) == {f.name for f in fields(LocalSettings)}


def test_a_spec_built_in_python_is_checked_and_normalised():
    spec = FinetuneSpec("tiny:bert", "RTE", "3", epochs=5, learning_rate="2e-5")
    assert (spec.task, spec.seed, spec.epochs, spec.learning_rate) == ("rte", 3, 5.0, 2e-5)
    assert spec.run_id() == FinetuneSpec("tiny:bert", "rte", 3).run_id()  # equal settings, equal run ids
    for bad, message in [({"seed": -1}, "seed: -1 is below 0"), ({"epochs": math.inf}, "epochs: inf is not a finite"),
                         ({"precision": "fp8"}, "precision: 'fp8' is not one of auto, fp32, fp16, bf16"),
                         ({"group_by_length": "yes"}, "group_by_length: 'yes' is not true or false")]:
        with pytest.raises(UserError, match="^" + message):
            FinetuneSpec(**{"model": "tiny:bert", "task": "rte", "seed": 0, **bad})


# ---------------------------------------------------------------------------- the Python API writes nothing
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seed": -1}, "harness.finetune: seed: -1 is below 0"),
        ({"seed": "a"}, "harness.finetune: seed: 'a' is not a whole number"),
        ({"seed": 1.5}, "harness.finetune: seed: 1.5 is not a whole number"),
        ({"seed": True}, "harness.finetune: seed: True is not a whole number"),
        ({"seed": None}, "harness.finetune: seed is null"),
        ({"seed": 2**32}, "harness.finetune: seed: 4294967296 is above 4294967295"),
        ({"learning_rate": float("nan")}, "harness.finetune: learning_rate: nan is not a finite number"),
        ({"task": ["rte"]}, "harness.finetune: task: ['rte'] is not text"),
        ({"max_length": 10**8}, "harness.finetune: max_length: 100000000 is above 1048576"),
        ({"lr": 1e-5}, "harness.finetune: unknown key 'lr' — remove it or fix its spelling (allowed: model, task, seed, epochs,"),
        ({"save_steps": 0}, "harness.finetune: save_steps: 0 is below 1"),
        ({"region": "atlantis"}, "harness.finetune: region: unknown region 'atlantis' of USA for the carbon"),
        ({"country_iso_code": "XYZ"}, "harness.finetune: country_iso_code: unknown country ISO code 'XYZ'"),
        ({"keep_checkpoints": "no"}, "harness.finetune: keep_checkpoints: 'no' is not true or false"),
        ({"output": 5}, "harness.finetune: output: 5 is not a folder path"),
    ],
)
def test_api_junk_arguments_raise_naming_the_argument_and_write_nothing(tmp_path, kwargs, message):
    import harness

    call = {"model": "tiny:bert", "task": "rte", "seed": 0, "output": tmp_path / "out", **kwargs}
    with pytest.raises(UserError) as info:
        harness.finetune(**call)
    assert str(info.value).startswith(message) and "\n" not in str(info.value), str(info.value)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 0}, "harness.score_bias: limit: 0 is below 1"),
        ({"limit": True}, "harness.score_bias: limit: True is not a whole number"),
        ({"scoring": None}, "harness.score_bias: scoring is null"),
        ({"scoring": "published"}, "harness.score_bias: scoring: 'published' is not one of default, reference,"),
        ({"dataset": "crowspairs"}, "harness.score_bias: dataset: unknown bias dataset 'crowspairs'"),
        ({"batch_tokens": -5}, "harness.score_bias: batch_tokens: -5 is below 1"),
    ],
)
def test_score_bias_junk_arguments_write_nothing(tmp_path, kwargs, message):
    import harness

    call = {"model": "tiny:bert", "dataset": "winobias", "output": tmp_path / "out", **kwargs}
    with pytest.raises(UserError) as info:
        harness.score_bias(**call)
    assert str(info.value).startswith(message), str(info.value)
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------- one class of bad input each
def test_bias_scoring_null_is_refused_at_load():
    # it used to pass --dry-run, and then every bias run failed
    doc = {"bias": {"models": ["tiny:bert"], "options": {"scoring": None}}}
    with pytest.raises(UserError, match=r"^x\.yaml: bias\.options\.scoring is null"):
        parse_experiment(doc, where="x.yaml")
    doc = {"preset": "votenrank", **BIAS}
    doc["bias"] = {**doc["bias"], "overrides": [{"datasets": ["winobias"], "set": {"precision": None}}]}
    with pytest.raises(UserError, match=r"bias\.overrides\[0\]\.set\.precision is null"):
        parse_experiment(doc, where="x.yaml")


def test_runs_per_gpu_is_bounded_as_a_flag_and_as_a_key(tmp_path):
    err = one_line_exit_2(vnr(["run", str(SMOKE), "--dry-run", "--runs-per-gpu", "1e11"], tmp_path))
    assert err.endswith("--runs-per-gpu: 100000000000 is above 64"), err
    assert list(tmp_path.iterdir()) == []
    for section in ("local", "slurm"):
        with pytest.raises(UserError, match=rf"^x\.yaml: {section}\.runs_per_gpu: 100000000000 is above 64$"):
            parse_experiment({**GRID, section: {"runs_per_gpu": "1e11"}}, where="x.yaml")
    with pytest.raises(UserError, match=r"^local\.runs_per_gpu: 65 is above 64$"):
        LocalSettings(runs_per_gpu=65)
    assert parse_experiment({**GRID, "local": {"runs_per_gpu": 64}}).local.runs_per_gpu == 64


def test_runs_per_gpu_auto_and_the_calibration_keys_are_declared(tmp_path):
    err = one_line_exit_2(vnr(["run", str(SMOKE), "--dry-run", "--runs-per-gpu", "many"], tmp_path))
    assert err.endswith("--runs-per-gpu: 'many' is neither auto nor a whole number of runs"), err
    assert list(tmp_path.iterdir()) == []
    assert parse_experiment({**GRID, "local": {"runs_per_gpu": "Auto"}}).local.runs_per_gpu == "auto"
    with pytest.raises(UserError, match=r"^x\.yaml: slurm\.calibrate: "):
        parse_experiment({**GRID, "slurm": {"calibrate": "no"}}, where="x.yaml")
    with pytest.raises(UserError, match=r"^x\.yaml: local\.calibration_budget_s: inf "):
        parse_experiment({**GRID, "local": {"calibration_budget_s": float("inf")}}, where="x.yaml")
    props = config_json_schema()["$defs"]
    for section in ("LocalSettingsOptions", "SlurmSettingsOptions"):
        fields = props[section]["properties"]
        assert {"runs_per_gpu", "calibrate", "calibration_budget_s"} <= set(fields), section
        assert "auto" in fields["runs_per_gpu"]["description"] and fields["calibrate"]["description"]
        assert "calibration" in fields["calibration_budget_s"]["description"]


def test_max_length_1e8_is_one_line(tmp_path):
    err = one_line_exit_2(vnr(["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0",
                               "--max-length", "1e8", "--output", "out"], tmp_path))
    assert err.endswith("--max-length: 100000000 is above 1048576"), err
    assert list(tmp_path.iterdir()) == []
    doc = {"finetune": {**GRID["finetune"], "hyperparameters": {"max_length": "1e8"}}}
    with pytest.raises(UserError, match=r"finetune\.hyperparameters\.max_length: 100000000 is above 1048576"):
        parse_experiment(doc, where="x.yaml")


def test_an_unknown_region_or_country_is_one_line_at_entry(tmp_path):
    err = one_line_exit_2(vnr(["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0",
                               "--region", "atlantis", "--output", "out"], tmp_path))
    assert "--region: unknown region 'atlantis' of USA" in err, err
    err = one_line_exit_2(vnr(["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0",
                               "--country", "XYZ", "--output", "out"], tmp_path))
    assert "--country: unknown country ISO code 'XYZ'" in err, err
    assert list(tmp_path.iterdir()) == []
    doc = {"finetune": {**GRID["finetune"], "run_options": {"country_iso_code": "FRA", "region": "bretagne"}}}
    with pytest.raises(UserError, match=r"^x\.yaml: finetune\.run_options\.region: region 'bretagne'.*USA and CAN only"):
        parse_experiment(doc, where="x.yaml")
    assert FinetuneRunOptions(country_iso_code="can", region="Ontario").given() == {
        "country_iso_code": "can", "region": "Ontario"}  # known: passed on as given


def test_config_model_args_reach_parse_model_args_as_written():
    # a hub id: every from_pretrained option applies (a tiny model takes only dtype and attn_implementation)
    from harness.models import parse_model_args

    for args in ({"revision": {"nested": [1, 2]}}, {"revision": "main", "dtype": "bf16"}, {"revison": "x"}):
        doc = {"bias": {"models": [{"name": "bert-base-uncased", "model_args": copy.deepcopy(args)}], "datasets": ["winobias"]}}
        try:
            expected = parse_model_args(copy.deepcopy(args), where="m")
        except UserError as exc:
            with pytest.raises(UserError) as info:
                parse_experiment(doc, where="x.yaml")
            # the same refusal, named by the config: not a stringified value or a refusal of the config's own
            assert str(exc).split(": ", 1)[1] in str(info.value), (str(exc), str(info.value))
        else:
            assert parse_experiment(doc).specs[0].model_args == expected


def test_flags_name_themselves(tmp_path):
    err = one_line_exit_2(vnr(["finetune", "--model", "tiny:bert", "--task", "rte", "--seed", "0", "--lr", "nan",
                               "--output", "out"], tmp_path))
    assert err.endswith("--lr: nan is not a finite number"), err
    err = one_line_exit_2(vnr(["bias", "--model", "tiny:bert", "--dataset", "winobias", "--precision", "fp8",
                               "--output", "out"], tmp_path))
    assert err.endswith("--precision: 'fp8' is not one of auto, fp32, fp16, bf16"), err
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------- JSON Schema
def test_config_json_schema_is_a_json_schema_the_shipped_configs_follow():
    schema = config_json_schema()
    assert json.loads(json.dumps(schema)) == schema
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert {"name", "output", "finetune", "bias", "slurm", "local", "preset", "labels"} <= set(schema["properties"])
    epochs = schema["$defs"]["FinetuneSpecOptions"]["properties"]["epochs"]
    assert epochs["exclusiveMinimum"] == 0 and epochs["default"] == 5.0 and epochs["description"]
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for path in (PAPER, SMOKE):
        assert [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))] == [], path
    assert list(validator.iter_errors({"finetune": {"models": ["a"], "tasks": ["rte"]}, "slrum": {}}))


# ---------------------------------------------------------------------------- property tests
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

JUNK = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12),
    st.sampled_from(["", " ", "é", "名前", "a\nb", "\x00", "1e400", "-0", "nan", "rte", "fp32", "tiny:bert",
                     "{from: 0}", "04:00:00", "🙂", "0,0"]),
    st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.text(max_size=4), st.integers(-2, 2), max_size=2),
)


def _paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _paths(value, (*prefix, i))


def _mutate(doc, path, how, junk):
    doc = copy.deepcopy(doc)
    if not path:
        return junk if how == "replace" else doc
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if how == "replace":
        parent[last] = junk
    elif how == "delete":
        del parent[last]
    elif how == "duplicate" and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[last]))
    elif how == "unknown-key" and isinstance(parent, dict):
        parent[f"{last}_typo"] = junk
    return doc


def _shipped(path: Path) -> dict:
    doc = yaml.safe_load(path.read_text())
    if path == PAPER:  # the paper's 315 fine-tuning runs over one model, task and seed keep examples fast
        doc["finetune"] = {**doc["finetune"], "models": doc["finetune"]["models"][:2], "tasks": ["rte", "mnli"],
                           "seeds": {"from": 0, "to": 1}}
    return doc


CONFIGS = {"paper": _shipped(PAPER), "smoke": _shipped(SMOKE)}


@st.composite
def mutated_configs(draw):
    doc = CONFIGS[draw(st.sampled_from(sorted(CONFIGS)))]
    paths = list(_paths(doc))
    path = draw(st.sampled_from(paths))
    how = draw(st.sampled_from(["replace", "replace", "delete", "duplicate", "unknown-key"]))
    return _mutate(doc, path, how, draw(JUNK))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_configs())
def test_a_mutated_config_is_a_grid_or_one_line(doc):
    try:
        exp = parse_experiment(doc, where="x.yaml")
    except UserError as exc:
        message = str(exc)
        assert message.startswith("x.yaml") and "\n" not in message and message.strip() == message, message
    else:
        assert exp.specs and all(s.run_id() for s in exp.specs)


API_KEYS = ["seed", "epochs", "batch_size", "learning_rate", "weight_decay", "warmup_ratio", "max_length",
            "max_steps", "max_train_samples", "precision", "group_by_length", "task", "model", "save_steps",
            "keep_checkpoints", "region", "model_args", "nonsense"]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(API_KEYS), JUNK, min_size=1, max_size=3))
def test_api_calls_with_junk_are_valid_or_one_line_and_write_nothing(tmp_path_factory, kwargs):
    import harness

    out = tmp_path_factory.mktemp("api")
    call = {"model": "tiny:bert", "task": "rte", "seed": 0, "output": out / "o", **kwargs}
    ran = []
    import harness.finetune.train as train

    # what reaches the run function when validation lets a call through (the run itself is not the point)
    original = train.run_finetune
    train.run_finetune = lambda spec, output, **kw: ran.append((spec, kw)) or {"run_id": spec.run_id()}
    try:
        harness.finetune(**call)
    except UserError as exc:
        assert "\n" not in str(exc) and str(exc).startswith(("harness.finetune", "unknown", "region")), str(exc)
        assert not ran
    else:
        spec, options = ran[0]
        assert isinstance(spec, FinetuneSpec) and spec.seed >= 0 and math.isfinite(spec.learning_rate)
    finally:
        train.run_finetune = original
    assert list(out.iterdir()) == []


def test_run_options_are_keyword_options_of_their_run_functions():
    # the declarations a grid's run_options: are checked against stay true to the functions they feed
    import inspect

    from harness.kinds import kinds

    for kind in kinds():
        params = inspect.signature(kind.run_function()).parameters
        keyword = {p for p, v in params.items() if v.kind is inspect.Parameter.KEYWORD_ONLY}
        assert {f.name for f in fields(kind.options)} <= keyword - {"data_root", "progress"}, kind.name
