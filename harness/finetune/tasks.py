"""GLUE task registry and loaders (hub ``nyu-mll/glue`` or a local ``glue_data`` TSV directory).

Every loader returns the same shape, a :class:`TaskData` with plain column
lists ``text_a``, ``text_b`` (None for single-sentence tasks) and ``label``
(an int class id in the hub's label order, or a float for STS-B), so training
never sees where the data came from.

Each :class:`GlueTask` record is the one place that describes a task: where its
data is (hub config, ``glue_data`` folder and files), its columns and labels,
its metrics (:class:`Metric`: the key a run records, the criterion's short
name, a label for prose) and so the matrix criteria ``vnr collect`` makes of
it (:attr:`GlueTask.criteria`). Adding a task is adding one record to
:data:`TASKS`.

>>> get_task("SST-2").name, get_task("sts-b").is_regression, [s.hub_split for s in get_task("mnli").eval_splits]
('sst2', True, ['validation_matched', 'validation_mismatched'])
>>> [(c.name, c.record_key, c.label) for c in get_task("mnli").criteria]
[('mnli_m_acc', 'accuracy', 'matched accuracy'), ('mnli_mm_acc', 'accuracy_mm', 'mismatched accuracy')]
>>> [c.name for c in get_task("stsb").criteria], get_task("cola").metrics
(['stsb_pearson', 'stsb_spearman'], ('matthews_correlation',))

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

from ranking.floor.errors import UserError

log = logging.getLogger(__name__)

HUB_DATASET = "nyu-mll/glue"


class Metric(str):
    """A metric of a GLUE task: the name a run records (the string itself), with its criterion short name and label.

    It *is* its record key (``Metric("accuracy", "acc", "accuracy") == "accuracy"``),
    so code that reads records by metric name needs nothing else.

    >>> m = Metric("matthews_correlation", "mcc", "Matthews correlation")
    >>> m == "matthews_correlation", m.short, m.label
    (True, 'mcc', 'Matthews correlation')
    """

    short: str
    label: str

    def __new__(cls, key: str, short: str, label: str) -> Metric:
        obj = super().__new__(cls, key)
        obj.short = short
        obj.label = label
        return obj

    @property
    def key(self) -> str:
        return str(self)

    def __reduce__(self):  # pickle / deepcopy keep the attributes (the isolated runner pickles specs)
        return (Metric, (str(self), self.short, self.label))


ACCURACY = Metric("accuracy", "acc", "accuracy")
F1 = Metric("f1", "f1", "F1")
MCC = Metric("matthews_correlation", "mcc", "Matthews correlation")
PEARSON = Metric("pearson", "pearson", "Pearson correlation")
SPEARMAN = Metric("spearman", "spearman", "Spearman correlation")


@dataclass(frozen=True)
class EvalSplit:
    """One dev set of a task: its metric-key suffix in the record, hub split, TSV file, criterion tag and label."""

    suffix: str = ""  # appended to each metric key in the record: "" or "_mm"
    hub_split: str = "validation"
    file: str = "dev.tsv"
    tag: str = ""  # inserted before the metric's short name in the criterion: "m_" -> mnli_m_acc
    label: str = ""  # prose: "matched"


@dataclass(frozen=True)
class TaskCriterion:
    """One matrix column a task yields: ``name`` (``mnli_mm_acc``) from the record's ``metrics[record_key]``."""

    task: str
    name: str
    record_key: str
    label: str  # "mismatched accuracy"
    unit: str = "score (0-1)"

    def source(self, epoch: str, seeds: str) -> str:
        """The sidecar's ``source`` text, e.g. ``GLUE rte dev accuracy, final epoch, mean over seeds 0,1``."""
        return f"GLUE {self.task} dev {self.label}, {epoch} epoch, mean over seeds {seeds}"


@dataclass(frozen=True)
class GlueTask:
    """One GLUE task: where its data is, which columns are text and label, how it is scored."""

    name: str  # canonical key, also the hub config name: cola, sst2, ...
    dir_name: str  # folder in glue_data: CoLA, SST-2, ...
    hub_columns: tuple[str, ...]  # text columns on the hub (one or two)
    tsv_columns: tuple[str, ...]  # the same text columns in the TSV header
    tsv_label: str  # label column in the TSV header
    label_names: tuple[str, ...]  # class names in the hub's id order; () for regression
    metrics: tuple[Metric, ...]  # first is the task's main metric
    tsv_header: bool = True
    tsv_positions: dict[str, int] = field(default_factory=dict)  # headerless files: column -> field index
    eval_splits: tuple[EvalSplit, ...] = (EvalSplit(),)
    string_labels: bool = False  # TSV labels are class names (else integer ids)
    hub_dataset: str = HUB_DATASET  # public source: <hub_dataset>/<name> through `datasets`

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

    @property
    def files(self) -> tuple[str, ...]:
        """The TSV files of the task's ``glue_data`` folder: train, then each dev set."""
        return ("train.tsv", *(s.file for s in self.eval_splits))

    @property
    def sources(self) -> dict[str, str]:
        """Where the task comes from: ``local`` (under a data root) and ``public`` (the hub)."""
        return {"local": f"glue/{self.dir_name}/{{{','.join(self.files)}}}",
                "public": f"hub:{self.hub_dataset}/{self.name}"}

    def metric_names(self) -> list[str]:
        """Every metric a run of this task records, e.g. MNLI: ``['accuracy', 'accuracy_mm']``."""
        return [m + s.suffix for s in self.eval_splits for m in self.metrics]

    @property
    def criteria(self) -> tuple[TaskCriterion, ...]:
        """The performance criteria of the task, one per (dev set, metric)."""
        return tuple(
            TaskCriterion(self.name, f"{self.name}_{s.tag}{m.short}", m + s.suffix, f"{s.label} {m.label}".strip())
            for s in self.eval_splits
            for m in self.metrics
        )


_BINARY = ("0", "1")
_NLI2 = ("entailment", "not_entailment")
TASKS: dict[str, GlueTask] = {
    t.name: t
    for t in (
        GlueTask("cola", "CoLA", ("sentence",), ("sentence",), "label", _BINARY, (MCC,),
                 tsv_header=False, tsv_positions={"label": 1, "sentence": 3}),
        GlueTask("sst2", "SST-2", ("sentence",), ("sentence",), "label", _BINARY, (ACCURACY,)),
        GlueTask("mrpc", "MRPC", ("sentence1", "sentence2"), ("#1 String", "#2 String"), "Quality", _BINARY,
                 (ACCURACY, F1)),
        GlueTask("stsb", "STS-B", ("sentence1", "sentence2"), ("sentence1", "sentence2"), "score", (),
                 (PEARSON, SPEARMAN)),
        GlueTask("qqp", "QQP", ("question1", "question2"), ("question1", "question2"), "is_duplicate", _BINARY,
                 (ACCURACY, F1)),
        GlueTask("mnli", "MNLI", ("premise", "hypothesis"), ("sentence1", "sentence2"), "gold_label",
                 ("entailment", "neutral", "contradiction"), (ACCURACY,),
                 eval_splits=(EvalSplit("", "validation_matched", "dev_matched.tsv", "m_", "matched"),
                              EvalSplit("_mm", "validation_mismatched", "dev_mismatched.tsv", "mm_", "mismatched")),
                 string_labels=True),
        GlueTask("qnli", "QNLI", ("question", "sentence"), ("question", "sentence"), "label", _NLI2,
                 (ACCURACY,), string_labels=True),
        GlueTask("rte", "RTE", ("sentence1", "sentence2"), ("sentence1", "sentence2"), "label", _NLI2,
                 (ACCURACY,), string_labels=True),
        GlueTask("wnli", "WNLI", ("sentence1", "sentence2"), ("sentence1", "sentence2"), "label", _BINARY,
                 (ACCURACY,)),
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
def glue_dir(data_root: Path) -> Path | None:
    """The ``glue_data`` folder of a data root (``<root>/glue``, ``<root>/glue_data`` or the root), None if it has none."""
    for candidate in (data_root / "glue", data_root / "glue_data", data_root):
        if candidate.is_dir() and any((candidate / t.dir_name).is_dir() for t in TASKS.values()):
            return candidate
    return None


def local_folder(task: GlueTask, data_root: Path | None) -> Path | None:
    """``task``'s folder under ``data_root`` if every file of the task is there, else None."""
    if data_root is None:
        return None
    root = glue_dir(Path(data_root))
    if root is None:
        return None
    folder = root / task.dir_name
    return folder if all((folder / f).is_file() for f in task.files) else None


def _read_tsv_rows(path: Path) -> list[list[str]]:
    # GLUE TSVs are not CSV: quotes are literal text, so split on tabs only. Lines end in \n;
    # str.splitlines would also split on \x85 or \u2028 inside sentences.
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not a UTF-8 text TSV (undecodable byte at offset {exc.start}); "
                        "is it the right file?") from None
    if "\x00" in text:
        raise UserError(f"{path}: a binary file (NUL bytes), not a tab-separated text file; is it the right file?")
    return [line.rstrip("\r").split("\t") for line in text.split("\n") if line.strip("\r")]


def read_glue_tsv(task: GlueTask, path: Path) -> Split:
    """Read one GLUE TSV file into a :class:`Split`, validating columns and labels."""
    if not path.is_file():
        present = sorted(p.name for p in path.parent.glob("*.tsv"))
        raise UserError(
            f"{task.dir_name}: {path} is missing (found: {', '.join(present) or 'no .tsv files'}); "
            f"the task needs {', '.join(task.files)}"
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
    """Read ``task`` from the ``glue_data`` directory under ``data_root`` (every file of the task must be there)."""
    root = glue_dir(Path(data_root))
    if root is None:
        raise UserError(
            f"data root {data_root} has no GLUE data: expected {Path(data_root) / 'glue'}/<Task>/train.tsv "
            "(the glue_data layout)"
        )
    folder = root / task.dir_name
    train = read_glue_tsv(task, folder / "train.tsv")
    evals = {s.suffix: read_glue_tsv(task, folder / s.file) for s in task.eval_splits}
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


def _looked_for(task: GlueTask, data_root: Path) -> str:
    root = glue_dir(data_root) or data_root / "glue"
    folder = root / task.dir_name
    if folder.is_dir():
        return f"{folder}/, which lacks {', '.join(f for f in task.files if not (folder / f).is_file())}"
    return f"{folder}/ with {', '.join(task.files)}"


def load_hub(task: GlueTask, data_root: Path | None = None) -> TaskData:
    """Load ``task`` from its public source (the hub, ``nyu-mll/glue``) through ``datasets``.

    Offline (``HF_DATASETS_OFFLINE`` / ``HF_HUB_OFFLINE``), ``datasets`` reads its
    cache only (what ``vnr prefetch`` put there); a task in no cache fails at
    once with one line naming the task, ``data_root`` and the prefetch command.
    """
    import datasets

    from harness.public_sources import offline, offline_error

    where = f"hub:{task.hub_dataset}/{task.name}"
    try:
        dd = datasets.load_dataset(task.hub_dataset, task.name)
    except Exception as exc:  # offline, no such config, hub down: say what to do
        if offline():
            looked = _looked_for(task, Path(data_root)) if data_root is not None else ""
            raise offline_error(f"GLUE task {task.dir_name}", data_root, looked, where) from None
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise UserError(
            f"cannot load {task.hub_dataset}/{task.name} from the hub ({type(exc).__name__}: {first}); "
            "check the network or pass --data-root with a glue_data directory"
        ) from None
    train = _split_from_hub(task, dd["train"], f"{where}[train]")
    evals = {s.suffix: _split_from_hub(task, dd[s.hub_split], f"{where}[{s.hub_split}]") for s in task.eval_splits}
    return TaskData(task, train, evals, where)


def load_task(
    task: str | GlueTask,
    data_root: Path | str | None = None,
    *,
    max_train_samples: int | None = None,
    max_eval_samples: int | None = None,
) -> TaskData:
    """Train and dev splits of ``task``: from ``data_root`` where it holds the task, else from the hub.

    The data root is per task: one that holds some tasks (say, all but QQP and
    MNLI) serves those, and the others come from their public source; a task
    folder with only some of its files (the shared data's QNLI: dev only) is
    not used. ``max_*_samples`` keep the first N examples of each split (the
    same subset for every seed).
    """
    t = task if isinstance(task, GlueTask) else get_task(task)
    root = Path(data_root) if data_root is not None else None
    folder = local_folder(t, root)
    if folder is not None:
        data = load_local(t, root)  # type: ignore[arg-type]
    else:
        if root is not None:
            log.info("GLUE task %s is not (complete) in the data root %s: loading it from %s",
                     t.dir_name, root, t.sources["public"])
        data = load_hub(t, root)
    data.train = data.train.head(max_train_samples)
    data.evals = {k: v.head(max_eval_samples) for k, v in data.evals.items()}
    return data


def criteria_names(task: str) -> list[str]:
    """The matrix columns a fine-tuning run on ``task`` scores (its record's criteria, in order).

    >>> criteria_names("mrpc")
    ['mrpc_acc', 'mrpc_f1']
    """
    return [c.name for c in get_task(task).criteria]
