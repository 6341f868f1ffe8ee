"""How many votes a column casts: one vote per benchmark by default, or one per column on request.

A table imported from another tool often holds many columns of one benchmark: MMLU's 57
subtasks beside its group score, ``acc`` beside ``acc_norm``. Ranked column by column, MMLU
alone would decide the ranking. Each :class:`~ranking.table.Criterion` therefore says what it
is (``benchmark``, ``detail``, ``aggregate``), and the rules rank under the weights of a
**vote mode**:

* ``benchmark`` (the default): a ``detail`` column (a subtask behind its benchmark's aggregate,
  a secondary metric) does not vote; the other columns of one benchmark share its vote, each
  with its own weight divided by their number. A column without a benchmark is its own.
* ``column``: every column votes with its own weight, except an ``aggregate`` column whose
  benchmark also has the parts it aggregates (they vote instead, so nothing is counted twice).

A table whose criteria name no benchmark (every published reproduction, a plain CSV) ranks the
same under both modes. Weight 0 is the table's existing "shown but not ranked".

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

VOTES = ("benchmark", "column")
DEFAULT_VOTE = "benchmark"


def check_vote(vote: str | None) -> str:
    """The vote mode, or a one-line :class:`UserError` naming the allowed ones."""
    vote = DEFAULT_VOTE if vote is None else vote
    if vote not in VOTES:
        raise UserError(f"vote {vote!r} is not one of {', '.join(VOTES)} (benchmark: one vote per benchmark; "
                        "column: one vote per column)")
    return vote


def vote_weights(criteria: Sequence[Any], vote: str | None = None) -> Any:
    """Each criterion's weight under the vote mode ``vote`` (module docstring), as a numpy array."""
    import numpy as np

    vote = check_vote(vote)
    own = np.array([float(c.weight) for c in criteria])
    if vote == "column":
        has_parts = {c.vote_unit for c in criteria if not c.aggregate}
        return np.array([0.0 if c.aggregate and c.vote_unit in has_parts else w for c, w in zip(criteria, own)])
    voting: dict[str, int] = {}
    columns: dict[str, int] = {}
    for c in criteria:
        columns[c.vote_unit] = columns.get(c.vote_unit, 0) + 1
        if not c.detail:
            voting[c.vote_unit] = voting.get(c.vote_unit, 0) + 1

    def share(c: Any, w: float) -> float:
        if c.vote_unit not in voting:  # a benchmark of detail columns only: they share its vote instead
            return w / columns[c.vote_unit]
        return 0.0 if c.detail else w / voting[c.vote_unit]

    return np.array([share(c, w) for c, w in zip(criteria, own)])


def structured(criteria: Sequence[Any]) -> bool:
    """Whether any criterion says it shares a benchmark with others or is a detail / aggregate (else both
    vote modes rank alike)."""
    units: dict[str, int] = {}
    for c in criteria:
        units[c.vote_unit] = units.get(c.vote_unit, 0) + 1
    return any(c.detail or c.aggregate for c in criteria) or any(n > 1 for n in units.values())


def apply_votes(table: Any, vote: str | None = None) -> tuple[Any, dict[str, Any]]:
    """(the table with its weights under ``vote``, what the output states about it).

    The statement: ``{"vote": mode, "benchmarks": n voting units, "columns": n columns, "voting_columns": n,
    "not_voting": [names]}``; the table is returned unchanged when its criteria name no structure.
    """
    vote = check_vote(vote)
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
