"""GLUE task registry and loaders (hub ``nyu-mll/glue`` or a local ``glue_data`` TSV directory).

Every loader returns the same shape, a :class:`TaskData` with plain column
lists ``text_a``, ``text_b`` (None for single-sentence tasks) and ``label``
(an int class id in the hub's label order, or a float for STS-B), so training
never sees where the data came from.

>>> get_task("SST-2").name, get_task("sts-b").is_regression, get_task("mnli").eval_splits
('sst2', True, (('', 'validation_matched'), ('_mm', 'validation_mismatched')))

Local layout (``<data root>/glue/<Dir>/``, the classic ``glue_data`` download):

======  =====================  ==========================================
task    files                  columns used
======  =====================  ==========================================
CoLA    train.tsv dev.tsv      no header: label = field 1, sentence = field 3
SST-2   train.tsv dev.tsv      sentence, label
MRPC    train.tsv dev.tsv      #1 String, #2 String, Quality (BOM header)
STS-B   train.tsv dev.tsv      sentence1, sentence2, score (0-5 float)
QQP     train.tsv dev.tsv      question1, question2, is_duplicate
MNLI    train.tsv dev_matched.tsv dev_mismatched.tsv   sentence1, sentence2, gold_label
QNLI    train.tsv dev.tsv      question, sentence, label (entailment / not_entailment)
RTE     train.tsv dev.tsv      sentence1, sentence2, label (entailment / not_entailment)
WNLI    train.tsv dev.tsv      sentence1, sentence2, label (0 / 1)
======  =====================  ==========================================
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ranking.errors import UserError

log = logging.getLogger(__name__)

HUB_DATASET = "nyu-mll/glue"


@dataclass(frozen=True)
class GlueTask:
    """One GLUE task: where its data is, which columns are text and label, how it is scored."""

    name: str  # canonical key, also the hub config name: cola, sst2, ...
    dir_name: str  # folder in glue_data: CoLA, SST-2, ...
    hub_columns: tuple[str, ...]  # text columns on the hub (one or two)
    tsv_columns: tuple[str, ...]  # the same text columns in the TSV header
    tsv_label: str  # label column in the TSV header
    label_names: tuple[str, ...]  # class names in the hub's id order; () for regression
    metrics: tuple[str, ...]  # metric names, first is the task's main metric
    tsv_header: bool = True
    tsv_positions: dict[str, int] = field(default_factory=dict)  # headerless files: column -> field index
    eval_splits: tuple[tuple[str, str], ...] = (("", "validation"),)  # (metric suffix, hub split)
    eval_files: tuple[str, ...] = ("dev.tsv",)
    string_labels: bool = False  # TSV labels are class names (else integer ids)

    @property
    def is_regression(self) -> bool:
        return not self.label_names

    @property
    def num_labels(self) -> int:
        return 1 if self.is_regression else len(self.label_names)

    @property
    def problem_type(self) -> str:
        return "regression" if self.is_regression else "single_label_classification"

    @property
    def is_pair(self) -> bool:
        return len(self.hub_columns) == 2

    def metric_names(self) -> list[str]:
        """Every metric a run of this task records, e.g. MNLI: ``['accuracy', 'accuracy_mm']``."""
        return [m + suffix for suffix, _ in self.eval_splits for m in self.metrics]


_BINARY = ("0", "1")
_NLI2 = ("entailment", "not_entailment")
TASKS: dict[str, GlueTask] = {
    t.name: t
    for t in (
        GlueTask("cola", "CoLA", ("sentence",), ("sentence",), "label", _BINARY, ("matthews_correlation",),
                 tsv_header=False, tsv_positions={"label": 1, "sentence": 3}),
        GlueTask("sst2", "SST-2", ("sentence",), ("sentence",), "label", _BINARY, ("accuracy",)),
        GlueTask("mrpc", "MRPC", ("sentence1", "sentence2"), ("#1 String", "#2 String"), "Quality", _BINARY,
                 ("accuracy", "f1")),
        GlueTask("stsb", "STS-B", ("sentence1", "sentence2"), ("sentence1", "sentence2"), "score", (),
                 ("pearson", "spearman")),
        GlueTask("qqp", "QQP", ("question1", "question2"), ("question1", "question2"), "is_duplicate", _BINARY,
                 ("accuracy", "f1")),
        GlueTask("mnli", "MNLI", ("premise", "hypothesis"), ("sentence1", "sentence2"), "gold_label",
                 ("entailment", "neutral", "contradiction"), ("accuracy",),
                 eval_splits=(("", "validation_matched"), ("_mm", "validation_mismatched")),
                 eval_files=("dev_matched.tsv", "dev_mismatched.tsv"), string_labels=True),
        GlueTask("qnli", "QNLI", ("question", "sentence"), ("question", "sentence"), "label", _NLI2,
                 ("accuracy",), string_labels=True),
        GlueTask("rte", "RTE", ("sentence1", "sentence2"), ("sentence1", "sentence2"), "label", _NLI2,
                 ("accuracy",), string_labels=True),
        GlueTask("wnli", "WNLI", ("sentence1", "sentence2"), ("sentence1", "sentence2"), "label", _BINARY,
                 ("accuracy",)),
    )
}


def _key(name: str) -> str:
    return name.strip().lower().replace("-", "").replace("_", "")


def get_task(name: str) -> GlueTask:
    """The task called ``name`` (any case, with or without a hyphen: ``SST-2``, ``sst2``, ``STS-B``)."""
    key = _key(name)
    if key in TASKS:
        return TASKS[key]
    raise UserError(f"unknown GLUE task {name!r}: use one of {', '.join(t.dir_name for t in TASKS.values())}")


@dataclass
class Split:
    """Columns of one split: ``text_a``, ``text_b`` (None for one-sentence tasks), ``label``."""

    text_a: list[str]
    text_b: list[str] | None
    label: list[Any]
    source: str = ""

    def __len__(self) -> int:
        return len(self.label)

    def head(self, n: int | None) -> Split:
        if n is None or n >= len(self):
            return self
        return Split(self.text_a[:n], None if self.text_b is None else self.text_b[:n], self.label[:n], self.source)

    def texts(self) -> list[str]:
        """All text of the split (for training a tiny tokenizer)."""
        return self.text_a + (self.text_b or [])

    def to_dict(self) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {"text_a": self.text_a, "label": self.label}
        if self.text_b is not None:
            out["text_b"] = self.text_b
        return out


@dataclass
class TaskData:
    task: GlueTask
    train: Split
    evals: dict[str, Split]  # metric suffix ("" or "_mm") -> dev split
    source: str  # "hub:nyu-mll/glue" or the local directory


# ---------------------------------------------------------------------- local TSV
def glue_dir(data_root: Path) -> Path:
    """The ``glue_data`` folder of a data root: ``<root>/glue``, ``<root>/glue_data`` or the root itself."""
    for candidate in (data_root / "glue", data_root / "glue_data", data_root):
        if candidate.is_dir() and any((candidate / t.dir_name).is_dir() for t in TASKS.values()):
            return candidate
    raise UserError(
        f"data root {data_root} has no GLUE data: expected {data_root / 'glue'}/<Task>/train.tsv "
        "(the glue_data layout); fix --data-root / VNR_DATA_ROOT, or leave both unset to load from the hub"
    )


def _read_tsv_rows(path: Path) -> list[list[str]]:
    # GLUE TSVs are not CSV: quotes are literal text, so split on tabs only. Lines end in \n;
    # str.splitlines would also split on \x85 or \u2028 inside sentences.
    text = path.read_text(encoding="utf-8-sig")
    return [line.rstrip("\r").split("\t") for line in text.split("\n") if line.strip("\r")]


def read_glue_tsv(task: GlueTask, path: Path) -> Split:
    """Read one GLUE TSV file into a :class:`Split`, validating columns and labels."""
    if not path.is_file():
        present = sorted(p.name for p in path.parent.glob("*.tsv"))
        raise UserError(
            f"{task.dir_name}: {path} is missing (found: {', '.join(present) or 'no .tsv files'}); "
            f"the task needs {', '.join(['train.tsv', *task.eval_files])}"
        )
    rows = _read_tsv_rows(path)
    if task.tsv_header:
        if not rows:
            raise UserError(f"{path} is empty: expected a header with {', '.join(task.tsv_columns)}")
        header = [h.strip() for h in rows[0]]
        positions = {}
        for col in (*task.tsv_columns, task.tsv_label):
            if col not in header:
                raise UserError(
                    f"{path}: column {col!r} is missing from the header (found: {', '.join(header)}); "
                    f"{task.dir_name} needs {', '.join((*task.tsv_columns, task.tsv_label))}"
                )
            positions[col] = header.index(col)
        body, first_line = rows[1:], 2
    else:
        positions = dict(task.tsv_positions)
        body, first_line = rows, 1
    need = max(positions.values()) + 1
    text_cols = [positions[c] for c in task.tsv_columns]
    label_pos = positions[task.tsv_label]
    text_a: list[str] = []
    text_b: list[str] = []
    labels: list[Any] = []
    short = 0
    for offset, row in enumerate(body):
        if len(row) < need:
            short += 1
            if not task.tsv_header:  # no header to name columns: a short row means a missing column
                raise UserError(
                    f"{path}:{first_line + offset}: {len(row)} tab-separated fields, expected at least {need} "
                    f"(label in field {label_pos + 1}, text in field {text_cols[0] + 1})"
                )
            continue
        labels.append(_parse_label(task, row[label_pos].strip(), path, first_line + offset))
        text_a.append(row[text_cols[0]])
        if task.is_pair:
            text_b.append(row[text_cols[1]])
    if short:
        # The public QQP train file has a few broken rows; a file made mostly of them is wrong.
        if short > max(10, len(body) // 100):
            raise UserError(f"{path}: {short} of {len(body)} rows have fewer than {need} fields; is it the right file?")
        log.warning("%s: skipped %d rows with fewer than %d fields", path, short, need)
    if not labels:
        raise UserError(f"{path} has no examples")
    return Split(text_a, text_b if task.is_pair else None, labels, str(path))


def _parse_label(task: GlueTask, raw: str, path: Path, line: int) -> Any:
    if task.is_regression:
        try:
            return float(raw)
        except ValueError:
            raise UserError(f"{path}:{line}: score {raw!r} is not a number") from None
    if task.string_labels:
        if raw in task.label_names:
            return task.label_names.index(raw)
    elif raw in task.label_names:
        return int(raw)
    raise UserError(f"{path}:{line}: label {raw!r} is not one of {', '.join(task.label_names)}")


def load_local(task: GlueTask, data_root: Path) -> TaskData:
    """Read ``task`` from the ``glue_data`` directory under ``data_root``."""
    root = glue_dir(Path(data_root))
    folder = root / task.dir_name
    if not folder.is_dir():
        present = sorted(t.dir_name for t in TASKS.values() if (root / t.dir_name).is_dir())
        raise UserError(
            f"task {task.dir_name} is not in the data root {root} (present: {', '.join(present)}); "
            f"add {folder}/ with {', '.join(['train.tsv', *task.eval_files])}, "
            "or leave --data-root / VNR_DATA_ROOT unset to load it from the hub"
        )
    train = read_glue_tsv(task, folder / "train.tsv")
    evals = {suffix: read_glue_tsv(task, folder / fname) for (suffix, _), fname in zip(task.eval_splits, task.eval_files)}
    return TaskData(task, train, evals, str(folder))


# ---------------------------------------------------------------------- hub
def _split_from_hub(task: GlueTask, ds: Any, where: str) -> Split:
    columns = list(ds.column_names)
    for col in (*task.hub_columns, "label"):
        if col not in columns:
            raise UserError(f"{where}: column {col!r} missing (found: {', '.join(columns)})")
    labels = list(ds["label"])
    labels = [float(x) for x in labels] if task.is_regression else [int(x) for x in labels]
    text_b = list(ds[task.hub_columns[1]]) if task.is_pair else None
    return Split(list(ds[task.hub_columns[0]]), text_b, labels, where)


def load_hub(task: GlueTask) -> TaskData:
    """Load ``task`` from the hub (``nyu-mll/glue``) through ``datasets``."""
    import datasets

    try:
        dd = datasets.load_dataset(HUB_DATASET, task.name)
    except Exception as exc:  # offline, no such config, hub down: say what to do
        raise UserError(
            f"cannot load {HUB_DATASET}/{task.name} from the hub ({type(exc).__name__}: {exc}); "
            "check the network or pass --data-root with a glue_data directory"
        ) from None
    where = f"hub:{HUB_DATASET}/{task.name}"
    train = _split_from_hub(task, dd["train"], f"{where}[train]")
    evals = {suffix: _split_from_hub(task, dd[split], f"{where}[{split}]") for suffix, split in task.eval_splits}
    return TaskData(task, train, evals, where)


def load_task(
    task: str | GlueTask,
    data_root: Path | str | None = None,
    *,
    max_train_samples: int | None = None,
    max_eval_samples: int | None = None,
) -> TaskData:
    """Train and dev splits of ``task``, from ``data_root`` if given, else from the hub.

    ``max_*_samples`` keep the first N examples of each split (the same subset for every seed).
    """
    t = task if isinstance(task, GlueTask) else get_task(task)
    data = load_local(t, Path(data_root)) if data_root is not None else load_hub(t)
    data.train = data.train.head(max_train_samples)
    data.evals = {k: v.head(max_eval_samples) for k, v in data.evals.items()}
    return data
