"""Run kinds: one :class:`RunKind` record per kind of run, one table of them (:data:`KINDS`).

A run kind (fine-tuning, bias scoring) is declared once, in its own package (``harness/finetune/kind.py``,
``harness/bias/kind.py``): its spec (what a run computes, the run id's content), its run options (what the
run function takes besides the spec), its run function, the spec field it runs on (a GLUE task, a bias set),
its half of ``vnr collect``, its section of the grid config (``harness/<kind>/grid.py``: which keys list
the runs, :mod:`harness.grid.sections`), whether the grid's calibration measures its runs, what
``vnr prefetch`` downloads for it and the one-line summary of a record. Code that needs to know a kind asks this table
(:func:`get_kind`, :func:`kind_of`); nothing dispatches on the spec's class. A new kind is one package with
its record and one line here.

The table is shaped like the importers' :data:`ranking.importers.FORMATS`: name → (where the record lives, as
``"module:attr"``, imported when first asked for; what the kind runs)::

    from harness.kinds import get_kind, kind_of
    get_kind("finetune").spec            # harness.specs.FinetuneSpec
    kind_of(spec).target_of(spec)        # "rte" for a fine-tuning spec, "crows_pairs" for a bias one

>>> list(KINDS)
['finetune', 'bias']
>>> get_kind("bias").target, get_kind("finetune").seed
('dataset', 'seed')
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ranking.floor.errors import UserError

#: kind name → (its :class:`RunKind` record as ``"module:attr"``, what a run of it does).
KINDS: dict[str, tuple[str, str]] = {
    "finetune": ("harness.finetune.kind:KIND", "fine-tune one model on one GLUE task with one seed"),
    "bias": ("harness.bias.kind:KIND", "score one model's social bias on one bias benchmark"),
}


def load(ref: str) -> Any:
    """The object a ``"module:attr"`` reference names (the module imported now)."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class Data:
    """What a kind's targets need on disk (:mod:`harness.prefetch`: ``vnr prefetch`` and the offline check).

    ``available`` and ``fetch`` are ``"module:attr"`` references: ``available(target, data_root) -> bool``
    reads the disk only; ``fetch(target, data_root) -> str`` downloads what is missing and says where it is."""

    label: str  # how a line names a target: "GLUE task" ("GLUE task rte: in the data root ...")
    available: str
    fetch: str

    def is_available(self, target: str, data_root: Any) -> bool:
        return bool(load(self.available)(target, data_root))

    def download(self, target: str, data_root: Any) -> str:
        return str(load(self.fetch)(target, data_root))


@dataclass(frozen=True)
class RunKind:
    """One kind of run, as everything that handles runs needs to know it.

    ``run``, ``collect`` and ``summary`` are ``"module:attr"`` references, imported when used (running needs
    torch; collecting needs pandas), so that reading the table stays light.
    """

    name: str  # what ``spec.kind`` says, the grid config's section, ``--only``'s kind label
    spec: type  # the spec dataclass: one run's identity (harness.specs)
    options: type  # the run function's keyword options besides the spec (harness.specs)
    run: str  # "module:attr": run(spec, output, *, data_root, progress, **options) -> record
    target: str  # the spec field a run is on: a GLUE task, a bias set (status rows, --only, prefetch)
    collect: str  # "module:attr": collect(exp, specs, usable, table, epoch=...) adds this kind's columns
    summary: str  # "module:attr": summary(record) -> one line (what ``vnr finetune`` / ``vnr bias`` print)
    prefetch: Data | None  # how vnr prefetch gets a target of this kind on disk (None: only the model is fetched)
    seed: str | None = None  # the spec field holding the seed, if runs of this kind are seeded
    calibrated: bool = False  # the grid's calibration measures runs of this kind and packs them as measured
    grid: str | None = None  # "module:attr": its section of the experiment config (harness.grid.sections.GridSection)
    #: "module:attr" pair: (groups(specs, k) -> list of spec lists, run_group(group, output, *, data_root,
    #: options) -> (run id, status, seconds, error) per run) where runs of this kind can train fused (``fuse: K``)
    fused: tuple[str, str] | None = None
    #: "module:attr": criteria_of(target) -> the matrix columns a run on that target scores (decide first draws
    #: them seed by seed: :mod:`harness.grid.decide`); None for a kind whose runs decide first does not spend
    criteria_of: str | None = None

    def run_function(self) -> Callable[..., dict[str, Any]]:
        return load(self.run)

    def collector(self) -> Callable[..., None]:
        return load(self.collect)

    def grid_section(self) -> Any:
        """How a grid config writes runs of this kind (:class:`harness.grid.sections.GridSection`); a kind
        without one cannot be in a grid config."""
        if self.grid is None:
            raise UserError(f"run kind {self.name!r} has no grid section")
        return load(self.grid)

    def fused_groups(self, specs: list[Any], k: int) -> list[list[Any]]:
        """``specs`` (of this kind) in the groups that train together, at most ``k`` a group; each run alone
        for a kind that does not fuse."""
        return load(self.fused[0])(specs, k) if self.fused and k > 1 else [[s] for s in specs]

    def run_fused_group(self, group: list[Any], output: Any, **kwargs: Any) -> list[tuple[str, str, float, Any]]:
        """Train one group of :meth:`fused_groups` as one process: each run's (id, status, seconds, error)."""
        if not self.fused:
            raise TypeError(f"run kind {self.name!r} does not train fused")
        return load(self.fused[1])(group, output, **kwargs)

    def criteria_names(self, target: str) -> list[str]:
        """The matrix columns a run of this kind on ``target`` scores (its kind's ``criteria_of``)."""
        return list(load(self.criteria_of)(target)) if self.criteria_of else []

    def summary_line(self, record: dict[str, Any]) -> str:
        return load(self.summary)(record)

    def target_of(self, spec: Any) -> str:
        return getattr(spec, self.target)

    def seed_of(self, spec: Any) -> Any:
        """The spec's seed, or ``""`` for a kind without seeds (a status row's column)."""
        return getattr(spec, self.seed) if self.seed else ""

    def prepare(self, spec: Any, values: Mapping[str, Any], *, where: str | None,
                names: Callable[[str], str | None] | None = None) -> tuple[Any, Any]:
        """The spec and the run options of one run, every value checked by the field that declares it.

        ``values`` holds spec fields and run options by name (a grid's ``hyperparameters:`` and
        ``run_options:`` together, the keywords of ``harness.finetune``); each goes to the class that declares
        it and a name neither declares is refused. With a ready ``spec``, ``values`` may hold options only.
        Errors are one line naming ``where`` (or the field's flag, through ``names``).
        """
        from dataclasses import fields

        from ranking.floor.schema import validate

        option_names = {f.name for f in fields(self.options)}
        options = {k: v for k, v in values.items() if k in option_names}
        rest = {k: v for k, v in values.items() if k not in option_names}
        if spec is None:
            spec = validate(self.spec, rest, where=where, names=names)
        elif rest:
            raise UserError(f"{where}(spec): give either a {self.spec.__name__} or its fields, not both "
                            f"({', '.join(rest)} given beside a spec)")
        return spec, validate(self.options, options, where=where, names=names)

    def fields(self) -> tuple[str, ...]:
        """Every field a run of this kind is given: its spec's, then its options'."""
        from dataclasses import fields

        return tuple(f.name for f in (*fields(self.spec), *fields(self.options)))


_LOADED: dict[str, RunKind] = {}


def get_kind(name: str) -> RunKind:
    """The record of run kind ``name`` (see :data:`KINDS`), or a one-line error naming the kinds."""
    if name not in KINDS:
        raise UserError(f"unknown run kind {name!r} (kinds: {', '.join(KINDS)})")
    ref = KINDS[name][0]
    kind = _LOADED.get(ref)
    if kind is None:
        kind = _LOADED[ref] = load(ref)
        if kind.name != name:
            raise TypeError(f"{ref} declares run kind {kind.name!r}, listed as {name!r}")
    return kind


def kinds() -> list[RunKind]:
    """Every kind's record, in the table's order."""
    return [get_kind(name) for name in KINDS]


def kind_of(spec: Any) -> RunKind:
    """The record of ``spec``'s kind (a spec declares its kind by name); TypeError for anything else."""
    name = getattr(spec, "kind", None)
    kind = get_kind(name) if name in KINDS else None
    if kind is None or type(spec) is not kind.spec:
        raise TypeError(f"not a run spec: {spec!r}")
    return kind


def spec_kind(value: Any) -> RunKind | None:
    """The kind of ``value`` if it is a ready spec, else None (an API argument that may be a spec or a model)."""
    name = getattr(value, "kind", None)
    if isinstance(name, str) and name in KINDS and type(value) is get_kind(name).spec:
        return get_kind(name)
    return None


def fused_groups(specs: Sequence[Any], k: int) -> list[list[Any]]:
    """A grid's specs in fused groups of at most ``k``: each kind groups its own runs (:meth:`RunKind.fused_groups`;
    a kind that does not fuse: each run alone), the groups in the order of each one's first run. What the local
    executor trains together and what a fused SLURM array makes one task of."""
    index = {id(s): i for i, s in enumerate(specs)}
    by_kind: dict[str, tuple[RunKind, list[Any]]] = {}
    for spec in specs:
        by_kind.setdefault(kind_of(spec).name, (kind_of(spec), []))[1].append(spec)
    groups = [g for kind, runs in by_kind.values() for g in kind.fused_groups(runs, k)]
    return sorted(groups, key=lambda g: index[id(g[0])])


def calibrated(specs: Iterable[Any]) -> list[Any]:
    """The specs whose kind the grid's calibration measures (fine-tuning runs), in order."""
    return [s for s in specs if kind_of(s).calibrated]
