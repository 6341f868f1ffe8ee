"""Loaders for the published leaderboards the analyses run on (read through :func:`ranking.load_table`, which
imports this module: it sits below the TABLE loader and the analyses alike).

* ``leaderboards/benchbench/`` (Zhang & Hardt): one tab-separated table per
  benchmark. :func:`load_benchbench` turns one into a :class:`ScoreTable`
  with the loaders' conventions: a cell ``a/b`` is the mean of its two
  metrics, GLUE's MNLI-m / MNLI-mm become one ``MNLI`` criterion, diagnostic
  and summary columns (AX, Average, Mean win rate, ...) are left out, ``-``
  is a missing score, rows and columns without any score are dropped, and the
  columns the original loaders negate (HELM ECE, stereotypes, representation,
  toxic fraction, inference time; HEIM ``↓``) get direction ``lower``. MTEB's
  category averages are weighted by their number of datasets (the loaders
  repeat each average that many times; a weight is the same thing). Names
  repeated in a leaderboard get ``_1``, ``_2``, ... (:func:`ranking.leaderboard.dedupe`).
* ``leaderboards/ranking_nlp/`` (Colombo et al.): task-level ``*.data``
  (:func:`load_ranking_nlp`; comma-separated with tabs inside the model
  name; ``xtrem.data`` has an empty extra field after the name; metrics split
  ``X-a`` / ``X-b`` get half weight each; the ``AX`` diagnostics weight 0) and
  instance-level CSVs (:func:`load_instance_level`: a long frame
  ``system, instance, metric, value``; the files' ``System`` and
  ``Utterance`` columns are swapped, which is undone here).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from ranking.floor.errors import UserError
from ranking.table import Criterion, ScoreTable

CARDINAL = ("glue", "superglue", "openllm", "mmlu", "bbh", "mteb", "vtab", "helm_capability", "imagenet")
HELM_SUBSETS = ("accuracy", "bias", "calibration", "efficiency", "fairness", "robustness", "summarization", "toxicity")
HEIM_SUBSETS = (
    "aesthetics_auto", "aesthetics_human", "alignment_auto", "alignment_human", "black_out",
    "nsfw", "nudity", "originality", "quality_auto", "quality_human",
)
ORDINAL = tuple(f"helm/{s}" for s in HELM_SUBSETS) + ("helm_lite",) + tuple(f"heim/{s}" for s in HEIM_SUBSETS) + ("bigcode",)
BENCHBENCH = CARDINAL + ORDINAL
_HELM_LOWER = ("ECE", "Representation", "Toxic fraction", "Stereotype", "inference time")


@dataclass(frozen=True)
class _Spec:
    file: str
    model: str | int  # column name, or 0 = the first column / the index
    after: str | None = None  # criteria are the columns after this one ...
    columns: tuple[str, ...] | None = None  # ... or exactly these
    pattern: str | None = None  # ... or those matching this regex
    exclude: tuple[str, ...] = ()
    lower: tuple[str, ...] = ()  # substrings marking lower-is-better columns
    lower_arrow: bool = False  # "↓" in the name marks lower-is-better
    index_model: bool = False  # rows have one more field than the header: the first is the model
    extra: dict = field(default_factory=dict)


def _spec(name: str) -> _Spec:
    if name.startswith("helm/"):
        return _Spec(f"helm/{name[5:]}.tsv", 0, after="Mean win rate", lower=_HELM_LOWER)
    if name.startswith("heim/"):
        return _Spec(f"heim/{name[5:]}.tsv", 0, after="Mean win rate ↑ [ sort ]", lower_arrow=True)
    return {
        "glue": _Spec("glue/leaderboard.tsv", "Model", after="Score", exclude=("AX",)),
        "superglue": _Spec("superglue/leaderboard.tsv", "Model", after="Score", exclude=("AX-b", "AX-g")),
        "openllm": _Spec("openllm/leaderboard.tsv", "Model", after="Average"),
        "mmlu": _Spec("mmlu/leaderboard.tsv", "model_name", pattern=r"^harness\|"),
        "bbh": _Spec("bbh/leaderboard.tsv", "Model", after="Average"),
        "mteb": _Spec("mteb/leaderboard.tsv", "Model", pattern=r"^\S.* Average \(\d+ datasets?\)$"),
        "vtab": _Spec("vtab/leaderboard.tsv", 0, exclude=("Mean (selected datasets)",), index_model=True),
        "helm_capability": _Spec("helm_capability/leaderboard.tsv", "Model", after="Mean score"),
        "imagenet": _Spec("imagenet/leaderboard.tsv", "Weight", pattern=r"^acc_\d+$"),
        "helm_lite": _Spec("helm_lite/leaderboard.tsv", "Model", after="Mean win rate"),
        "bigcode": _Spec("bigcode/leaderboard.tsv", "Models", columns=("humaneval-python", "java", "javascript")),
    }[name]


def benchbench_kind(name: str) -> str:
    """``cardinal`` or ``ordinal`` (how Zhang & Hardt treat the benchmark)."""
    return "cardinal" if name in CARDINAL else "ordinal"


def _benchbench_dir(root: Path | None) -> Path:
    if root is None:
        raise UserError("no data root: pass --data-root DIR or set VNR_DATA_ROOT")
    root = Path(root)
    for cand in (root / "leaderboards" / "benchbench", root / "benchbench", root):
        if (cand / "glue" / "leaderboard.tsv").exists():
            return cand
    raise UserError(f"no benchbench leaderboards under data root {root} (expected leaderboards/benchbench/)")


def _cell(text: str) -> float:
    t = str(text).strip()
    if t in ("", "-", "nan", "NaN"):
        return np.nan
    if "/" in t:
        a, b = t.split("/", 1)
        return (float(a) + float(b)) / 2.0
    return float(t)


def load_benchbench(name: str, root: Path | None) -> ScoreTable:
    """One benchbench leaderboard as a ScoreTable, e.g. ``load_benchbench("helm/accuracy", root)``."""
    name = name.strip("/").removesuffix(".tsv")
    if name in ("helm", "heim"):
        name = f"{name}/{'accuracy' if name == 'helm' else 'alignment_human'}"
    if name not in BENCHBENCH:
        raise UserError(f"unknown benchbench leaderboard {name!r} (known: {', '.join(BENCHBENCH)})")
    spec = _spec(name)
    path = _benchbench_dir(root) / spec.file
    try:
        if spec.index_model:
            frame = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False)
            frame = frame.reset_index()  # the extra leading field became the index
            model_col = frame.columns[0]
        else:
            frame = pd.read_csv(path, sep="\t", dtype=str, keep_default_na=False, index_col=False)
            model_col = frame.columns[spec.model] if isinstance(spec.model, int) else spec.model
    except FileNotFoundError:
        raise UserError(f"cannot read {path}: no such file") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read {path}: {str(exc).splitlines()[0]}") from None
    columns = [str(c) for c in frame.columns]
    if spec.columns is not None:
        crit_cols = list(spec.columns)
    elif spec.pattern is not None:
        crit_cols = [c for c in columns if re.search(spec.pattern, c)]
    elif spec.after is not None:
        if spec.after not in columns:
            raise UserError(f"{path}: column {spec.after!r} not found (columns: {', '.join(columns[:8])}, ...)")
        crit_cols = columns[columns.index(spec.after) + 1 :]
    else:
        crit_cols = [c for c in columns if c != model_col]
    crit_cols = [c for c in crit_cols if c not in spec.exclude and c != model_col and c.strip()]
    data: dict[str, np.ndarray] = {}
    for c in crit_cols:
        try:
            data[c] = np.array([_cell(v) for v in frame[c]], dtype=float)
        except ValueError as exc:
            raise UserError(f"{path}: column {c!r} has a cell that is not a number ({exc})") from None
    if name == "glue":
        data["MNLI"] = (data.pop("MNLI-m") + data.pop("MNLI-mm")) / 2.0
    weights: dict[str, float] = {}
    if name == "mteb":
        renamed = {}
        for c, v in data.items():
            m = re.match(r"^(.*) Average \((\d+) datasets?\)$", c)
            assert m is not None
            renamed[m.group(1)] = v
            weights[m.group(1)] = float(m.group(2))
        data = renamed
    if name.startswith("heim/"):
        data = {c.replace(" [ sort ]", "").strip(): v for c, v in data.items()}
    from ranking.leaderboard import dedupe

    models = dedupe([str(m).strip() for m in frame[model_col]])
    values = pd.DataFrame(data, index=models)
    values = values.dropna(axis=1, how="all").dropna(axis=0, how="all")
    directions = {}
    for c in values.columns:
        if (spec.lower and any(s in c for s in spec.lower)) or (spec.lower_arrow and "↓" in c):
            directions[c] = "lower"
    crits = [
        Criterion(str(c), directions.get(c, "higher"), weights.get(c, 1.0), source=f"benchbench/{name}")
        for c in values.columns
    ]
    return ScoreTable.from_frame(values, criteria=crits, source=f"benchbench/{name}")


# ---------------------------------------------------------------------- ranking_nlp (Colombo et al.)
def load_ranking_nlp(path: str | Path) -> ScoreTable:
    """A task-level ``*.data`` leaderboard of Colombo et al. (``glue.data``, ``superglue.data``, ``xtrem.data``)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"cannot read {path}: no such file") from None
    rows = [r for r in csv.reader(text.splitlines()) if any(f.strip() for f in r)]
    if len(rows) < 2:
        raise UserError(f"{path}: expected a header and at least one row")
    header = [h.strip() for h in rows[0]]
    if len(header) < 3 or header[1].lower() != "score":
        raise UserError(f"{path}: expected the header 'Model, Score, <tasks...>', got {', '.join(header[:3])}")
    tasks = header[2:]
    names, values = [], []
    for lineno, row in enumerate(rows[1:], start=2):
        fields = [f.strip() for f in row]
        if len(fields) == len(header) + 1 and fields[1] == "":
            fields = [fields[0]] + fields[2:]  # xtrem.data: an empty field after the name
        if len(fields) != len(header):
            raise UserError(f"{path}, line {lineno}: {len(fields)} fields, expected {len(header)}")
        names.append(" ".join(fields[0].replace('"', " ").split()))
        try:
            values.append([_cell(v) for v in fields[2:]])
        except ValueError:
            raise UserError(f"{path}, line {lineno}: a score is not a number") from None
    from ranking.leaderboard import dedupe

    frame = pd.DataFrame(values, index=dedupe(names), columns=tasks)
    weights = {}
    for t in tasks:
        if t.upper().startswith("AX"):
            weights[t] = 0.0
        elif re.search(r"-[ab]$", t):
            weights[t] = 0.5
    return ScoreTable.from_frame(frame, weights=weights, source=str(path))


def load_instance_level(path: str | Path) -> pd.DataFrame:
    """An instance-level CSV of Colombo et al. as a long frame ``system, instance, metric, value``.

    The files' ``Utterance`` column holds the system id and ``System`` the
    instance id (documented quirk); this loader swaps them back. Generic CSVs
    with columns ``system, instance`` (any case) and metric columns are read as they are.
    """
    path = Path(path)
    try:
        frame = pd.read_csv(path)
    except FileNotFoundError:
        raise UserError(f"cannot read {path}: no such file") from None
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as exc:
        raise UserError(f"cannot read {path}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}") from None
    cols = {c.lower(): c for c in frame.columns}
    if "utterance" in cols and "system" in cols:
        sys_col, inst_col = cols["utterance"], cols["system"]  # swapped in the published files
    elif "system" in cols and "instance" in cols:
        sys_col, inst_col = cols["system"], cols["instance"]
    else:
        raise UserError(f"{path}: expected columns System/Utterance or system/instance, got {', '.join(frame.columns[:5])}")
    metrics = [c for c in frame.columns if c not in (sys_col, inst_col)]
    if not metrics:
        raise UserError(f"{path}: no metric columns")
    long = frame.melt(id_vars=[sys_col, inst_col], value_vars=metrics, var_name="metric", value_name="value")
    long = long.rename(columns={sys_col: "system", inst_col: "instance"})
    long["system"] = long["system"].astype(str)
    long["instance"] = long["instance"].astype(str)
    long["value"] = pd.to_numeric(long["value"], errors="coerce")
    return long[["system", "instance", "metric", "value"]]


# ---------------------------------------------------------------------- instance-level tables
def load_instance_table(spec: str | Path, root: Path | None = None) -> pd.DataFrame:
    """The instance-level frame for a path (as given, or under the data root ``root`` / ``leaderboards/``)."""
    spec = str(spec)
    candidates = [Path(spec)]
    if root is not None and not Path(spec).is_absolute():
        candidates += [root / spec, root / "leaderboards" / spec]
        if "/" not in spec:
            base = root / "leaderboards" / "ranking_nlp" / "instance_level"
            candidates += [base / spec, base / f"{spec}.csv"]
    for path in candidates:
        if path.is_file():
            return load_instance_level(path)
    raise UserError(f"instance-level table {spec!r} not found (e.g. ranking_nlp/instance_level/TAC_08.csv)")
