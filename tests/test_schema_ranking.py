"""The ranking side's input files against their declared schemas (:mod:`ranking.schemas`).

A property suite mutates valid criteria sidecars, the bundled leaderboard specs and the bundled scenarios
(wrong types, nulls, duplicate keys, missing keys, unknown keys, unicode, huge numbers, truncation) and runs
``vnr rank`` on each: every outcome is a correct result (exit 0, the table read as the file says) or exit 2
with ONE stderr line and nothing written — never a traceback. Then one test per bad-input class of issue #20
that belongs to the ranking side, and ``vnr criteria init`` round-tripping any column name.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import os
import tempfile
from fractions import Fraction
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.cli import main
from ranking.floor.errors import UserError
from ranking.schemas import KINDS, json_schema
from ranking.table import ScoreTable

REPO = Path(__file__).resolve().parents[1]
LEADERBOARDS = sorted((REPO / "configs" / "leaderboards").glob("*.yaml"))
SCENARIOS = sorted((REPO / "configs" / "scenarios").glob("*.yaml"))
#: 150 examples per input kind by default; VNR_PROPERTY_EXAMPLES=2000 for a longer search.
PROPERTY = settings(max_examples=int(os.environ.get("VNR_PROPERTY_EXAMPLES", "150")), deadline=None,
                    suppress_health_check=list(HealthCheck))

CSV = "model,acc,f1,energy_kwh\nA,0.9,0.8,3\nB,0.7,0.9,1\nC,0.5,0.6,2\n"
SIDECAR = {
    "table": "t.csv",
    "model_column": "model",
    "groups": ["performance", "efficiency"],
    "criteria": {
        "acc": {"direction": "higher", "weight": 1, "group": "performance", "unit": "%"},
        "f1": {"direction": "higher", "weight": 0.5, "group": "performance", "source": "dev set"},
        "energy_kwh": {"direction": "lower", "weight": 1, "group": "efficiency", "unit": "kWh", "method": "measured"},
    },
}


# ---------------------------------------------------------------------- running the CLI in-process
def run_cli(argv: list[str], cwd: Path) -> tuple[int, list[str]]:
    """``vnr ARGV`` in this process (the same ``main`` and exit path as the console script): exit code and
    stderr lines. Any exception other than the CLI's own handling escapes: a traceback fails the test."""
    err, out = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(cwd)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse usage errors
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        os.chdir(here)
    lines = [line for line in err.getvalue().splitlines() if not line.startswith("note:")
             and ": note:" not in line and not line.startswith(("WARNING", "INFO"))]
    return code, lines


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def assert_clean(code: int, lines: list[str], before: dict[str, bytes], folder: Path) -> None:
    """A correct run, or exit 2 with one line and nothing written."""
    assert code in (0, 2), (code, lines)
    if code == 2:
        assert len(lines) == 1, lines
        assert "Traceback" not in lines[0]
        assert snapshot(folder) == before


# ---------------------------------------------------------------------- mutations
JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.sampled_from([10**400, -(10**400), 10**19, 1e308, -0.0]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["", " ", "higher", "lower", "1/2", "1/0", "nan", "-1", "t.csv", "../t.csv", "😀", "\u2028",
                     "null", "yes", "<script>", "a" * 300]),
    st.lists(st.integers(min_value=-3, max_value=3), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(min_value=0, max_value=3), max_size=2),
)


def paths_of(doc, prefix=()):
    """Every (path) of a parsed YAML document: dict keys and list positions, depth first."""
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += paths_of(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += paths_of(v, (*prefix, i))
    return out


def _parent(doc, path):
    for part in path[:-1]:
        doc = doc[part]
    return doc


def mutate(data, doc):
    """``doc`` with one to three structural mutations drawn by ``data``."""
    doc = copy.deepcopy(doc)
    for _ in range(data.draw(st.integers(min_value=1, max_value=3))):
        paths = paths_of(doc)
        path = data.draw(st.sampled_from(paths))
        op = data.draw(st.sampled_from(["set", "delete", "unknown key", "rename key", "wrap in list"]))
        if not path:  # the whole document
            if op == "set":
                doc = data.draw(JUNK)
            continue
        parent = _parent(doc, path)
        key = path[-1]
        if op == "set":
            parent[key] = data.draw(JUNK)
        elif op == "delete":
            del parent[key]
        elif op == "unknown key" and isinstance(parent[key], dict):
            parent[key][data.draw(st.text(min_size=1, max_size=8))] = data.draw(JUNK)
        elif op == "rename key" and isinstance(parent, dict):
            value = parent.pop(key)
            parent[data.draw(st.one_of(st.text(min_size=1, max_size=8), st.integers(0, 9), st.booleans()))] = value
        elif op == "wrap in list":
            parent[key] = [parent[key]]
        if not isinstance(doc, (dict, list)):
            break
    return doc


def as_text(data, doc) -> str:
    """The YAML text of ``doc``, sometimes with a line repeated (a duplicate key) or cut short (truncated)."""
    text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    how = data.draw(st.sampled_from(["as is", "as is", "duplicate a line", "truncate"]))
    lines = text.splitlines(keepends=True)
    if how == "duplicate a line" and lines:
        i = data.draw(st.integers(0, len(lines) - 1))
        lines.insert(i, lines[i])
        text = "".join(lines)
    elif how == "truncate" and text:
        text = text[: data.draw(st.integers(0, len(text) - 1))]
    return text


# ---------------------------------------------------------------------- the property suite
@PROPERTY
@given(data=st.data())
def test_mutated_sidecars_rank_correctly_or_fail_in_one_line(data):
    doc = mutate(data, SIDECAR)
    text = as_text(data, doc)
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        (folder / "t.csv").write_text(CSV)
        (folder / "t.yaml").write_text(text, encoding="utf-8")
        before = snapshot(folder)
        code, lines = run_cli(["rank", "t.csv", "--rule", "borda", "--format", "csv"], folder)
        assert_clean(code, lines, before, folder)
        if code == 0:  # a correct result: every column read with the direction and weight the file gives it
            read = yaml.safe_load(text)
            table = ScoreTable.from_csv(folder / "t.csv")
            for c in table.criteria:
                attrs = read["criteria"][c.name] or {}
                assert c.direction == attrs.get("direction", "higher")
                weight = attrs.get("weight", 1)
                expected = float(Fraction(weight)) if isinstance(weight, str) else float(weight)  # "1/2"
                assert c.weight == expected


@pytest.mark.parametrize("spec", LEADERBOARDS, ids=lambda p: p.stem)
def test_mutated_leaderboard_specs_rank_or_fail_in_one_line(spec, data_root):
    doc = yaml.safe_load(spec.read_text())

    @PROPERTY
    @given(data=st.data())
    def check(data):
        text = as_text(data, mutate(data, doc))
        with tempfile.TemporaryDirectory() as d:
            folder = Path(d)
            (folder / "spec.yaml").write_text(text, encoding="utf-8")
            before = snapshot(folder)
            code, lines = run_cli(["rank", "spec.yaml", "--rule", "borda", "--data-root", str(data_root),
                                   "--format", "csv"], folder)
            assert_clean(code, lines, before, folder)

    check()


@pytest.fixture(scope="module")
def scenario_results(tmp_path_factory):
    from test_scenarios_util import write_results

    return write_results(tmp_path_factory.mktemp("results") / "r", seeds=False)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda p: p.stem)
def test_mutated_scenarios_rank_or_fail_in_one_line(scenario, scenario_results, data_root):
    doc = yaml.safe_load(scenario.read_text())
    # the paper's scenario ranks the case study (data root); the user's ranks a collected folder
    source = ["--data-root", str(data_root)] if "table" in doc else ["--results", str(scenario_results)]

    @PROPERTY
    @given(data=st.data())
    def check(data):
        text = as_text(data, mutate(data, doc))
        with tempfile.TemporaryDirectory() as d:
            folder = Path(d)
            (folder / "s.yaml").write_text(text, encoding="utf-8")
            before = snapshot(folder)
            code, lines = run_cli(["rank", "--scenario", "s.yaml", *source, "--format", "csv"], folder)
            assert_clean(code, lines, before, folder)

    check()


# ---------------------------------------------------------------------- criteria init round-trips any name
NAMES = st.text(
    st.characters(blacklist_categories=("Cs", "Cc"), blacklist_characters="\ufeff"), min_size=1, max_size=12
).filter(lambda s: s.strip() and s.strip() != "model")


@PROPERTY
@given(names=st.lists(NAMES, min_size=1, max_size=4, unique=True),
       extra=st.lists(st.sampled_from(["a b", "a: b", "-x", "#c", "'q'", '"dq"', "😀 e", "true", "null", "1e3",
                                       "[x]", "{y}", "x,y", "&a", "*b", "!t", "%p", "@q", "`r", "|s", ">t", "? u"]),
                      max_size=3, unique=True))
def test_criteria_init_round_trips_any_column_name(names, extra):
    import csv

    raw = list({c.strip(): c for c in reversed([*names, *extra])}.values())[::-1]  # one per name as read
    columns = [c.strip() for c in raw]  # names are read without their edge spaces (' 0 ' is '0')
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        with open(folder / "t.csv", "w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh)
            writer.writerow(["model", *raw])
            writer.writerow(["A", *range(len(columns))])
            writer.writerow(["B", *range(len(columns), 0, -1)])
        stated = "," not in columns[0]  # --lower takes COL,...
        code, lines = run_cli(["criteria", "init", "t.csv", *([f"--lower={columns[0]}"] if stated else [])], folder)
        assert code == 0, lines
        written = (folder / "criteria.yaml").read_text(encoding="utf-8")
        table = ScoreTable.from_csv(folder / "t.csv")
        assert table.names == tuple(columns)
        assert list(yaml.safe_load(written)["criteria"]) == columns
        assert yaml.safe_load(written)["table"] == "t.csv"
        if stated:
            assert table.criterion(columns[0]).direction == "lower"


# ---------------------------------------------------------------------- one test per bad-input class
def _table_folder(tmp_path: Path, sidecar_text: str, name: str = "t.yaml") -> Path:
    (tmp_path / "t.csv").write_text(CSV)
    (tmp_path / name).write_text(sidecar_text)
    return tmp_path


def _one_line(tmp_path: Path, argv: list[str]) -> str:
    before = snapshot(tmp_path)
    code, lines = run_cli(argv, tmp_path)
    assert code == 2 and len(lines) == 1, (code, lines)
    assert snapshot(tmp_path) == before
    return lines[0]


FULL = yaml.safe_dump(SIDECAR, sort_keys=False)


def test_a_partial_sidecar_is_refused_unless_the_cli_states_the_rest(tmp_path):
    partial = {**SIDECAR, "criteria": {k: v for k, v in SIDECAR["criteria"].items() if k != "energy_kwh"}}
    _table_folder(tmp_path, yaml.safe_dump(partial))
    line = _one_line(tmp_path, ["rank", "t.csv"])
    assert line.startswith("vnr rank: error: t.yaml: criteria: column(s) 'energy_kwh' of t.csv are "
                           "not described")
    assert "--higher energy_kwh or --lower energy_kwh" in line
    code, lines = run_cli(["rank", "t.csv", "--lower", "energy_kwh", "--format", "json", "--rule", "borda"], tmp_path)
    assert code == 0, lines
    from ranking import load_table

    assert load_table(tmp_path / "t.csv", lower=["energy_kwh"]).criterion("energy_kwh").direction == "lower"


def test_a_truncated_sidecar_is_one_line(tmp_path):
    for cut in range(1, len(FULL)):
        text = FULL[:cut]
        _table_folder(tmp_path, text)
        code, lines = run_cli(["rank", "t.csv", "--rule", "borda"], tmp_path)
        assert code in (0, 2) and (code == 0 or len(lines) == 1), (cut, lines)
        if code == 0:  # a cut that still parses and describes every column (e.g. inside the last unit's text)
            assert set(yaml.safe_load(text)["criteria"]) == {"acc", "f1", "energy_kwh"}, (cut, text)


def test_a_duplicate_key_is_refused_naming_the_key_and_line(tmp_path):
    text = FULL.replace("  f1:", "  acc:\n    direction: lower\n  f1:", 1)
    _table_folder(tmp_path, text)
    line = _one_line(tmp_path, ["rank", "t.csv"])
    first = text.splitlines().index("  acc:") + 1
    second = first + [ln for ln in text.splitlines()[first:]].index("  acc:") + 1
    assert line == (f"vnr rank: error: t.yaml: line {second}: key 'acc' appears twice in one mapping "
                    f"(first on line {first}) — keep one of them")


def test_a_wrong_type_is_one_line_with_the_key_path_and_the_fix(tmp_path):
    _table_folder(tmp_path, FULL.replace("weight: 0.5", "weight: [1]"))
    line = _one_line(tmp_path, ["rank", "t.csv"])
    assert line == ("vnr rank: error: t.yaml: criteria.f1.weight: weight [1] is not a number — "
                    "write e.g. 0.5 or 1/2")


def test_a_sidecar_of_another_table_is_refused(tmp_path):
    _table_folder(tmp_path, FULL.replace("table: t.csv", "table: other.csv"), name="criteria.yaml")
    line = _one_line(tmp_path, ["rank", "t.csv"])
    assert line.startswith("vnr rank: error: criteria.yaml: table: it describes other.csv, not t.csv")


def test_a_neighbouring_csv_does_not_borrow_the_folder_sidecar(tmp_path):
    # the old bug: criteria.yaml written for one CSV silently applied to its neighbour
    _table_folder(tmp_path, FULL, name="criteria.yaml")
    (tmp_path / "other.csv").write_text(CSV)
    line = _one_line(tmp_path, ["rank", "other.csv"])
    assert "criteria.yaml: table: it describes t.csv, not other.csv" in line
    # an older sidecar without `table:` is refused beside several CSVs, with the line to add
    (tmp_path / "criteria.yaml").write_text(FULL.replace("table: t.csv\n", ""))
    line = _one_line(tmp_path, ["rank", "other.csv"])
    assert "names no table and its folder holds other CSVs (t.csv) — add the line `table: other.csv`" in line
    # ... and accepted where it can only mean one CSV: the only one of its folder
    (tmp_path / "other.csv").unlink()
    assert run_cli(["rank", "t.csv", "--rule", "borda"], tmp_path)[0] == 0


def test_a_sidecar_naming_a_column_the_table_lacks_is_refused(tmp_path):
    doc = copy.deepcopy(SIDECAR)
    doc["criteria"]["bleu"] = {"direction": "higher"}
    _table_folder(tmp_path, yaml.safe_dump(doc))
    line = _one_line(tmp_path, ["rank", "t.csv"])
    assert line.startswith("vnr rank: error: t.yaml: criteria.bleu: t.csv has no column 'bleu' — "
                           "remove the entry or fix its name")


def test_unknown_keys_nulls_and_huge_numbers_are_one_line(tmp_path):
    cases = {
        FULL.replace("model_column: model", "model_colum: model"): "unknown key 'model_colum' — remove it or fix its "
        "spelling (allowed: table, sha256, model_column, groups, standard_errors, standard_errors_sha256, board, criteria)",
        FULL.replace("direction: lower", "direction: null"): "criteria.energy_kwh.direction is null: give a value (a "
        "key left out keeps its default) — write which way is better: higher, lower or target",
        FULL.replace("weight: 0.5", "weight: 1.0e+400"): "criteria.f1.weight: weight inf is not finite — write a finite "
        "number >= 0",
        FULL.replace("weight: 0.5", f"weight: {10**400}"): "criteria.f1.weight: weight " + "1" + "0" * 58
        + "… is too large — write a finite number >= 0",
        "": "the file is empty — write the criteria sidecar (`vnr schema criteria` prints its schema)",
        "- acc\n": "must be a mapping (key: value), not a list",
    }
    for text, expected in cases.items():
        _table_folder(tmp_path, text)
        line = _one_line(tmp_path, ["rank", "t.csv"])
        assert line.startswith(f"vnr rank: error: t.yaml: {expected}"), line


def test_standard_errors_is_a_declared_key_naming_a_file_beside_the_sidecar(tmp_path):
    # (the importers write it; its contents are tested in test_table.py). A path out of the table's folder is
    # refused before anything is opened, so no other file's first line can reach an error message.
    for path in ("/etc/se.csv", "../../etc/passwd", "..", "sub/se.csv"):
        _table_folder(tmp_path, FULL + f"standard_errors: {path}\n")
        line = _one_line(tmp_path, ["rank", "t.csv"])
        assert f"standard_errors: {path!r} is not a file name — write the name of a file in the same folder" in line
        assert "root:" not in line
    _table_folder(tmp_path, FULL + "standard_errors: missing_se.csv\n")
    line = _one_line(tmp_path, ["rank", "t.csv"])
    assert "missing_se.csv" in line and "no such file" in line


def test_leaderboard_spec_classes(tmp_path, data_root):
    spec = yaml.safe_load((REPO / "configs" / "leaderboards" / "glue.yaml").read_text())
    cases = {
        "missing file": ({k: v for k, v in spec.items() if k != "file"}, "file is required — add it: the leaderboard "
                         "CSV, relative to the data root (or absolute)"),
        "wrong split": ({**spec, "criteria": {**spec["criteria"], "MRPC": {"split": "MRPC-F1"}}},
                        "criteria.MRPC.split must be a list, not text — write two criterion names for an 'a/b' "
                        "column"),
        "neither rows nor column": ({k: v for k, v in spec.items() if k != "model_column"},
                                    "neither model_column nor names is given"),
        "duplicate key": (None, "key 'CoLA' appears twice in one mapping"),
    }
    for case, (doc, expected) in cases.items():
        text = (REPO / "configs" / "leaderboards" / "glue.yaml").read_text().replace("  CoLA: {}", "  CoLA: {}\n  CoLA: {}") \
            if doc is None else yaml.safe_dump(doc)
        (tmp_path / "s.yaml").write_text(text)
        line = _one_line(tmp_path, ["rank", "s.yaml", "--data-root", str(data_root)])
        assert expected in line, (case, line)


def test_scenario_classes(tmp_path, scenario_results):
    good = (REPO / "configs" / "scenarios" / "user_weighted.yaml").read_text()
    cases = {
        good.replace("reference: am_performance", "reference: am_performance\nreference: borda"):
            "key 'reference' appears twice in one mapping",
        good.replace("rule: copeland", "rule: null"): "columns[4].rule is null: give a value — write a rule name",
        good.replace("simplex_resolution: 24", "simplex_resolution: 1e9"): "report.simplex_resolution: 1000000000 is "
        "above 400",
        good.replace("  performance: {}", "  performance: {}\n  true: {}"): "groups: key True is not text (YAML read "
        "it as a boolean) — quote it: \"True\":",
    }
    for text, expected in cases.items():
        (tmp_path / "s.yaml").write_text(text)
        line = _one_line(tmp_path, ["rank", "--scenario", "s.yaml", "--results", str(scenario_results)])
        assert expected in line, line


# ---------------------------------------------------------------------- vnr schema
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_vnr_schema_prints_the_json_schema_the_readers_use(kind, tmp_path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["schema", kind]) == 0
    schema = json.loads(out.getvalue())
    assert schema == json.loads(json.dumps(json_schema(kind)))
    assert schema["$schema"].startswith("https://json-schema.org/") and schema["type"] == "object"
    assert schema["additionalProperties"] is False  # unknown keys are refused, in the editor too
    assert set(schema["properties"]) == set(KINDS[kind].model_fields)


def test_vnr_schema_of_an_unknown_kind_is_one_line():
    with pytest.raises(UserError, match="unknown schema 'nope' — write one of: config, criteria, leaderboard, "
                       "scenario"):
        json_schema("nope")


def test_bundled_files_fit_their_schemas():
    from ranking.schemas import validate

    for path in LEADERBOARDS:
        validate(KINDS["leaderboard"], yaml.safe_load(path.read_text()), path)
    for path in SCENARIOS:
        validate(KINDS["scenario"], yaml.safe_load(path.read_text()), path)


def test_an_experiment_config_with_a_duplicate_key_is_refused_too(tmp_path):
    from harness.grid.config import load_experiment

    path = tmp_path / "grid.yaml"
    path.write_text("name: a\nfinetune:\n  models: [tiny:bert]\n  tasks: [rte]\n  tasks: [mrpc]\n  seeds: [0]\n")
    with pytest.raises(UserError, match=r"grid.yaml: line 5: key 'tasks' appears twice in one mapping \(first on "
                       r"line 4\) — keep one of them$"):
        load_experiment(path)


def test_describing_the_model_column_says_so(tmp_path):
    doc = copy.deepcopy(SIDECAR)
    doc["criteria"]["model"] = {"direction": "higher"}
    _table_folder(tmp_path, yaml.safe_dump(doc))
    line = _one_line(tmp_path, ["rank", "t.csv"])
    assert line == ("vnr rank: error: t.yaml: criteria.model: 'model' is the model column of t.csv, not a criterion — "
                    "remove the entry (or name another model_column)")


def test_the_schemas_allow_the_values_the_engine_knows():
    from ranking import plan, rules, schemas, settings, table

    assert schemas.DIRECTIONS == table.DIRECTIONS and rules.TIES is plan.TIES
    assert plan.PRESETS == tuple(settings.PRESETS)  # the declared names of the presets the engine defines
    from ranking import boards

    assert set(schemas.BOARD_NAMES) == set(boards.BOARDS)
    assert json_schema("scenario")["$defs"]["ColumnModel"]["properties"]["setting"]["enum"] == list(plan.SETTINGS)


def test_criteria_init_never_takes_over_another_tables_sidecar(tmp_path):
    (tmp_path / "a.csv").write_text("model,acc,kwh\nA,1,2\nB,2,1\n")
    (tmp_path / "b.csv").write_text("model,acc,kwh\nA,1,2\nB,2,1\n")
    assert run_cli(["criteria", "init", "a.csv"], tmp_path)[0] == 0
    assert run_cli(["criteria", "init", "b.csv"], tmp_path)[0] == 0  # criteria.yaml is a.csv's: b.csv gets b.yaml
    assert yaml.safe_load((tmp_path / "criteria.yaml").read_text())["table"] == "a.csv"
    assert yaml.safe_load((tmp_path / "b.yaml").read_text())["table"] == "b.csv"
    assert ScoreTable.from_csv(tmp_path / "b.csv").criterion("kwh").direction == "lower"
    # a broken sidecar: refused in one line, replaced with --force
    (tmp_path / "b.yaml").write_text("criteria: [\n")
    assert "b.csv already has a sidecar (b.yaml)" in _one_line(tmp_path, ["criteria", "init", "b.csv"])
    assert run_cli(["criteria", "init", "b.csv", "--force"], tmp_path)[0] == 0
    assert ScoreTable.from_csv(tmp_path / "b.csv").names == ("acc", "kwh")
