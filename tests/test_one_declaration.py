"""One declaration, every surface: each field of each run kind's spec and run options is reachable from the
CLI (``vnr finetune`` / ``vnr bias``), the grid config (the kind's section) and the Python API, and each
field of the grid's settings (:class:`~harness.grid.settings.SlurmSettings`,
:class:`~harness.grid.settings.LocalSettings`) from ``vnr run``'s flags, the config's ``slurm:`` / ``local:``
and the API (``harness.run_grid``; the settings' own dataclass for SLURM's); a bad value gets the same
one-line refusal from all three (only the prefix naming where differs: the flag, the config key, the
argument). Fields are read from the declarations, so a field added there is tested here without an edit."""

from __future__ import annotations

from dataclasses import fields

import pytest

from harness import flags
from harness.cli import build_parser, main
from harness.grid.config import parse_experiment
from harness.kinds import get_kind, kinds
from ranking.floor.errors import UserError
from ranking.floor.schema import validate

# how each kind's identifying fields are given: CLI flags, config section, API call
BASE = {
    "finetune": {"model": "tiny:bert", "task": "rte", "seed": 0},
    "bias": {"model": "tiny:bert", "dataset": "winobias"},
}
API = {"finetune": "finetune", "bias": "score_bias"}
# where a field is written in a grid config: the kind's section declares it (harness.grid.sections)
# fields with flags of their own (every command that loads a model; LoRA's two flags)
OWN = {"model": "--model", "model_args": "--model-args", "peft": "--peft-args"}
CANDIDATES = ("-5", "nope", "1e400", "x" * 2000)  # the first the declaration refuses is the bad value


def _bad_value(kind, name):
    """A value the field's declaration refuses (checked alone, on top of a valid spec), or None."""
    spec_fields = {f.name for f in fields(kind.spec)}
    for value in CANDIDATES:
        data = {**BASE[kind.name], name: value}
        try:
            if name in spec_fields:
                validate(kind.spec, data)
            else:
                validate(kind.options, {name: value})
        except UserError:
            return value
    return None


def _cases():
    for kind in kinds():
        for cls in (kind.spec, kind.options):
            for field in fields(cls):
                if field.name not in ("model",):
                    yield pytest.param(kind.name, field.name, id=f"{kind.name}.{field.name}")


def _after(message: str, key: str) -> str:
    """What a refusal says about the value: the text after the key or flag it names."""
    assert key in message, (key, message)
    return message.split(f"{key}: ", 1)[1] if f"{key}: " in message else message.split(key, 1)[1]


@pytest.mark.parametrize(("kind_name", "name"), list(_cases()))
def test_every_field_is_reachable_with_one_validation(kind_name, name, tmp_path, capsys, monkeypatch):
    import harness

    kind = get_kind(kind_name)
    is_option = name in {f.name for f in fields(kind.options)}
    flag = OWN.get(name) or flags.flag(kind.options if is_option else kind.spec, name)
    # the CLI has the flag
    parser = build_parser(kind_name)
    sub = parser._subparsers._group_actions[0].choices[kind_name]
    assert flag in sub._option_string_actions, flag
    # the config has the key: a list of the section (one run per value), its options, or its run_options
    grid = kind.grid_section()
    listed = {axis.field: axis.key for axis in grid.axes}
    section = grid.options if not is_option else "run_options"
    config = {"name": "x", "output": str(tmp_path / "out")}
    base_section = {"models": [BASE[kind_name]["model"]], **{axis.key: [BASE[kind_name][axis.field]] for axis in grid.axes}}
    assert name in listed or name == "model_args" or name in grid.options_model(kind).model_fields or is_option

    bad = _bad_value(kind, name)
    if bad is None or name in ("model_args", "peft"):  # free text (or read by its own parser): reachable is the point
        return
    # the API refuses it
    call = {**BASE[kind_name], name: bad}
    with pytest.raises(UserError) as api:
        getattr(harness, API[kind_name])(**call, output=tmp_path / "api")
    api_text = _after(str(api.value), name)
    # the config refuses it
    section_doc = {**base_section, **({listed[name]: [bad]} if name in listed else {section: {name: bad}})}
    with pytest.raises(UserError) as conf:
        parse_experiment({**config, kind_name: section_doc})
    conf_text = _after(str(conf.value), f"{listed[name]}[0]" if name in listed else name)
    # the CLI refuses it
    argv = [kind_name, *(a for k, v in BASE[kind_name].items() if k != name
                         for a in (OWN.get(k) or flags.flag(kind.spec, k), str(v)))]
    argv += [flag, bad, "--output", str(tmp_path / "cli")]
    capsys.readouterr()
    if isinstance(sub._option_string_actions[flag].default, bool) or sub._option_string_actions[flag].nargs == 0:
        return  # a switch takes no value: true or false is all it can say
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    cli_text = _after(err, flag)
    assert api_text == conf_text == cli_text, (api_text, conf_text, cli_text)
    assert not (tmp_path / "api").exists() and not (tmp_path / "cli").exists()


# ---------------------------------------------------------------------------- the grid's settings
SETTINGS_CANDIDATES = ("-5", "nope", "0", "1e400", "x" * 2000, "a b", "(")


def _settings_cases():
    from harness.grid.settings import LocalSettings, SlurmSettings

    for cls, section in ((SlurmSettings, "slurm"), (LocalSettings, "local")):
        for field in fields(cls):
            yield pytest.param(cls, section, field.name, id=f"{section}.{field.name}")


def _settings_bad_value(cls, name):
    for value in SETTINGS_CANDIDATES:
        try:
            validate(cls, {name: value})
        except UserError:
            return value
    return None


@pytest.mark.parametrize(("cls", "section", "name"), list(_settings_cases()))
def test_every_grid_setting_is_reachable_with_one_validation(cls, section, name, tmp_path, capsys):
    import yaml

    import harness
    from harness.grid.settings import LocalSettings, SlurmSettings

    key = {"time_min": "time"}.get(name, name) if cls is SlurmSettings else name
    flag = flags.flag(cls, name)
    # the CLI has the flag (vnr run), the config the key, the API the argument
    parser = build_parser("run")
    run = parser._subparsers._group_actions[0].choices["run"]
    assert flag in run._option_string_actions, flag
    from harness.grid.schema import LocalSection, SlurmSection

    assert key in (SlurmSection if cls is SlurmSettings else LocalSection).model_fields
    if cls is LocalSettings:
        import inspect

        assert name in inspect.signature(harness.run_grid).parameters
    action = run._option_string_actions[flag]
    if action.nargs == 0 or name == "additional":  # a switch; KEY=VALUE pairs read by their own parser
        return
    bad = _settings_bad_value(cls, name)
    assert bad is not None, name
    # the API refuses it
    grid = {"name": "x", "output": str(tmp_path / "out"), "finetune": {"models": ["tiny:bert"], "tasks": ["rte"]}}
    config = tmp_path / "x.yaml"
    config.write_text(yaml.safe_dump(grid))
    with pytest.raises(UserError) as api:
        if cls is LocalSettings:
            harness.run_grid(config, **{name: bad})
        else:
            SlurmSettings(**{name: bad})
    api_text = _after(str(api.value), name)
    # the config refuses it
    with pytest.raises(UserError) as conf:
        parse_experiment({**grid, section: {key: bad}})
    conf_text = _after(str(conf.value), key)
    # the CLI refuses it
    executor = ["--executor", "slurm"] if cls is SlurmSettings and name != "runs_per_gpu" else []
    capsys.readouterr()
    assert main(["run", str(config), "--dry-run", *executor, flag, bad]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    cli_text = _after(err, flag)
    assert api_text == conf_text == cli_text, (api_text, conf_text, cli_text)
    assert not (tmp_path / "out").exists()


def test_both_executors_packing_settings_are_one_declaration():
    """``runs_per_gpu``, ``calibrate`` and ``calibration_budget_s`` of ``local:`` and ``slurm:`` are one
    declaration each (one help text, one bound), given by one flag of ``vnr run``."""
    import typing

    from harness.grid.settings import PACKING_FIELDS, LocalSettings, SlurmSettings

    local, slurm = (typing.get_type_hints(c, include_extras=True) for c in (LocalSettings, SlurmSettings))
    for name in PACKING_FIELDS:
        assert local[name] == slurm[name], name
        assert flags.flag(LocalSettings, name) == flags.flag(SlurmSettings, name)
