"""How many votes a column casts: one vote per benchmark by default, or one per column on request.

A table imported from another tool often holds many columns of one benchmark: MMLU's 57
subtasks beside its group score, ``acc`` beside ``acc_norm``. Ranked column by column, MMLU
alone would decide the ranking. Each :class:`~ranking.table.Criterion` therefore says what it
is (``benchmark``, ``detail``, ``aggregate``), and the rules rank under the weights of a
**vote mode**:

* ``benchmark`` (the default): a ``detail`` column (a subtask behind its benchmark's aggregate,
  a secondary metric) does not vote; the other columns of one benchmark that rank (weight > 0) share
  its vote, each with its own weight divided by their number. A benchmark none of whose other columns
  ranks is voted for by its ranked detail columns instead. A column without a benchmark is its own.
* ``column``: every column votes with its own weight, except an ``aggregate`` column whose
  benchmark also has ranked parts (columns of weight > 0 that are not aggregates: they vote
  instead, so nothing is counted twice).

Votes are computed from the weights that rank: weight 0 is the table's "shown but not ranked", so a
weight-0 column takes no share of its benchmark's vote under either mode (it neither votes nor
halves another column's vote), and an aggregate whose parts all have weight 0 votes for its benchmark
under ``column`` as under ``benchmark`` (its parts are not ranked: giving way to them would drop the
benchmark). A benchmark is named by its normalised name (:class:`~ranking.table.Criterion` strips
the edge spaces where the name enters): ``X`` and ``X `` are one benchmark everywhere.

A table whose criteria name no benchmark (every published reproduction, a plain CSV) ranks the
same under both modes.

>>> from ranking.table import Criterion
>>> crits = [Criterion("mmlu", benchmark="mmlu", aggregate=True)] + [
...     Criterion(f"mmlu_{k}", benchmark="mmlu", detail=True) for k in range(57)] + [
...     Criterion("arc/acc", benchmark="arc", detail=True), Criterion("arc/acc_norm", benchmark="arc"),
...     Criterion("gsm8k/strict", benchmark="gsm8k"), Criterion("gsm8k/flexible", benchmark="gsm8k")]
>>> w = vote_weights(crits, "benchmark")
>>> [float(x) for x in (w[0], w[1:58].sum(), w[58], w[59], w[60], w[61])]
[1.0, 0.0, 0.0, 1.0, 0.5, 0.5]
>>> w = vote_weights(crits, "column")
>>> [float(x) for x in (w[0], w[1:58].sum(), w[58], w[59], w[60], w[61])]
[0.0, 57.0, 1.0, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ranking.floor.errors import UserError


def vote_weights(criteria: Sequence[Any], vote: str = "benchmark") -> Any:
    """Each criterion's weight under the vote mode ``vote`` (``benchmark`` or ``column``, checked where the choice
    enters: :class:`ranking.plan.RankPlan`), from the weights that rank (module docstring), as a numpy array."""
    import numpy as np

    own = np.array([float(c.weight) for c in criteria])
    ranked = [w > 0 for w in own]
    if vote == "column":
        has_parts = {c.vote_unit for c, r in zip(criteria, ranked) if r and not c.aggregate}
        return np.array([0.0 if c.aggregate and c.vote_unit in has_parts else w for c, w in zip(criteria, own)])
    voting: dict[str, int] = {}
    details: dict[str, int] = {}
    for c, r in zip(criteria, ranked):
        if r:
            counted = details if c.detail else voting
            counted[c.vote_unit] = counted.get(c.vote_unit, 0) + 1

    def share(c: Any, w: float) -> float:
        if w == 0:
            return 0.0  # shown but not ranked: no share of the vote
        if c.vote_unit not in voting:  # no other ranked column: the ranked detail columns share its vote instead
            return w / details[c.vote_unit]
        return 0.0 if c.detail else w / voting[c.vote_unit]

    return np.array([share(c, w) for c, w in zip(criteria, own)])


def structured(criteria: Sequence[Any]) -> bool:
    """Whether any criterion says it shares a benchmark with others or is a detail / aggregate (else both
    vote modes rank alike)."""
    units: dict[str, int] = {}
    for c in criteria:
        units[c.vote_unit] = units.get(c.vote_unit, 0) + 1
    return any(c.detail or c.aggregate for c in criteria) or any(n > 1 for n in units.values())


def apply_votes(table: Any, vote: str = "benchmark") -> tuple[Any, dict[str, Any]]:
    """(the table with its weights under ``vote``, what the output states about it).

    The statement: ``{"vote": mode, "benchmarks": n voting units, "columns": n columns, "voting_columns": n,
    "not_voting": [names]}``; the table is returned unchanged when its criteria name no structure.
    """
    crits = table.criteria
    info: dict[str, Any] = {"vote": vote, "columns": len(crits)}
    if not structured(crits):
        info.update(benchmarks=len(crits), voting_columns=sum(1 for c in crits if c.weight > 0), not_voting=[])
        return table, info
    w = vote_weights(crits, vote)
    if not (w > 0).any():
        raise UserError(f"no column votes under --vote {vote}: every column is a detail or has weight 0"
                        + (" (try --vote column)" if vote == "benchmark" else ""))
    voted = table.with_weights(w)
    units = {c.vote_unit for c, x in zip(crits, w) if x > 0}
    info.update(benchmarks=len(units), voting_columns=int((w > 0).sum()),
                not_voting=[c.name for c, x in zip(crits, w) if x == 0 and c.weight > 0])
    return voted, info


def changes_weights(info: dict[str, Any]) -> bool:
    """Whether the vote (an :func:`apply_votes` statement) changed any weight: then the output states it."""
    return info["benchmarks"] != info["columns"] or bool(info["not_voting"])


def _count(n: int, singular: str, plural: str | None = None) -> str:
    """``1 benchmark``, ``3 benchmarks``: a number and the noun in agreement with it."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def describe(info: dict[str, Any]) -> str:
    """The line the output states about the vote mode (nouns and verbs agree with their numbers).

    >>> describe({"vote": "benchmark", "benchmarks": 3, "columns": 62, "voting_columns": 4, "not_voting": ["a"] * 58})
    'votes: one per benchmark (3 benchmarks from 62 columns; 58 detail columns do not vote; --vote column: one per column)'
    >>> describe({"vote": "benchmark", "benchmarks": 1, "columns": 2, "voting_columns": 1, "not_voting": ["a"]})
    'votes: one per benchmark (1 benchmark from 2 columns; 1 detail column does not vote; --vote column: one per column)'
    >>> describe({"vote": "column", "benchmarks": 2, "columns": 3, "voting_columns": 2, "not_voting": ["mmlu"]})
    'votes: one per column (2 of 3 columns vote; 1 aggregate column left to its parts)'
    >>> describe({"vote": "column", "benchmarks": 1, "columns": 5, "voting_columns": 3, "not_voting": ["a", "b"]})
    'votes: one per column (3 of 5 columns vote; 2 aggregate columns left to their parts)'
    """
    k = len(info["not_voting"])
    if info["vote"] == "benchmark":
        rest = f"; {_count(k, 'detail column')} {'does' if k == 1 else 'do'} not vote" if k else ""
        return (f"votes: one per benchmark ({_count(info['benchmarks'], 'benchmark')} from "
                f"{_count(info['columns'], 'column')}{rest}; --vote column: one per column)")
    rest = f"; {_count(k, 'aggregate column')} left to {'its' if k == 1 else 'their'} parts" if k else ""
    n = info["voting_columns"]
    return (f"votes: one per column ({n} of {_count(info['columns'], 'column')} "
            f"{'votes' if n == 1 else 'vote'}{rest})")
