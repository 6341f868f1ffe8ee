"""Live weights: the data and script that let the report re-rank the models in the page.

The report embeds, as JSON, everything the ``weighted`` setting needs that does not
depend on the group weights, and a plain script (``live_weights.js``, no library, no
server, works from ``file://``) recomputes the rankings whenever a group-weight slider
moves. Under ``weighted`` a criterion's weight is ``own × group weight / the group's
total own weight`` (:func:`ranking.settings.weighted_table`; under the ``votenrank`` preset ``/ the group's
number of columns``: the scenario plan's divisor), so:

- **borda, dowdall, plurality** (positional, linear in the weights): each criterion's
  points per model are fixed (they depend on positions and the tie convention only);
  the score is the weighted sum of the points, exactly as :func:`ranking.rules.positional_scores`;
- **arithmetic_mean**: the median-imputed oriented scores, weighted and averaged;
- **copeland, minimax**: per criterion, which model is strictly better than which
  (``better``, one ``0``/``1`` string of ``n × n`` per criterion); the page sums the
  weights into the pairwise ``wins`` matrix (:mod:`ranking.pairwise`) and applies the rule.

The page ranks with the same tolerances as the Python rules (relative ``1e-12`` of the
largest attainable score), so its ranking equals :func:`ranking.rank` with
``setting="weighted"`` for the same group weights and ties convention; the browser test
(``tests/test_scenarios_live.py``) checks that on random weight vectors.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

import numpy as np

from ranking.table import ScoreTable

#: The rules the page re-ranks live, in the order of its table's columns.
LIVE_RULES = ("borda", "dowdall", "plurality", "arithmetic_mean", "copeland", "minimax")


def live_data(table: ScoreTable, ties: str, group_weights: Mapping[str, float] | None = None, *,
              divisor: str = "total_weight") -> dict[str, Any] | None:
    """The JSON the page's script reads; ``None`` when the table has no groups (nothing to weigh).

    ``divisor``: what an own weight is divided by under ``weighted`` — the scenario plan's preset's
    (:attr:`ranking.settings.Preset.weighted_divisor`: the group's total own weight, or under ``votenrank`` its
    number of columns), so the page weighs as :func:`ranking.rank` does.

    >>> from ranking.rules import worked_example
    >>> from dataclasses import replace
    >>> t = worked_example()
    >>> t = t.with_criteria([replace(c, group="x" if c.name == "c1" else "y") for c in t.criteria])
    >>> d = live_data(t, "default")
    >>> d["groups"], d["totals"], d["points"]["borda"][1]   # B's points per criterion: 9 in all
    (['x', 'y'], [1.0, 4.0], [2.0, 0.0, 3.0, 2.0, 2.0])
    """
    from ranking.rules import BORDA, DOWDALL, PLURALITY, median_imputed, position_counts

    groups = list(table.group_names)
    if not groups or any(c.group is None and c.weight > 0 for c in table.criteria):
        return None
    if divisor not in ("total_weight", "columns"):
        raise ValueError(f"unknown divisor {divisor!r}")
    totals = {g: 0.0 for g in groups}
    for c in table.criteria:  # the same order of summation as ranking.settings.weighted_table
        if c.group is not None:
            totals[c.group] = totals[c.group] + (1.0 if divisor == "columns" else c.weight)
    oriented = table.oriented
    above, below, m = position_counts(oriented)
    points = {
        name: _nested(vector.points(above, below, m, ties))
        for name, vector in (("borda", BORDA), ("dowdall", DOWDALL), ("plurality", PLURALITY))
    }
    better = []
    for j in range(table.n_criteria):
        col = oriented[:, j]
        b = col[:, None] > col[None, :]  # NaN compares False: a pair with a missing score gives no vote
        better.append("".join("1" if x else "0" for x in b.ravel()))
    initial = {g: float((group_weights or {}).get(g, 1.0)) for g in groups}
    return {
        "models": list(table.models),
        "groups": groups,
        "criteria": [c.name for c in table.criteria],
        "group_of": [groups.index(c.group) if c.group is not None else -1 for c in table.criteria],
        "own": [float(c.weight) for c in table.criteria],
        "totals": [totals[g] for g in groups],
        "present": [[int(v) for v in row] for row in (~np.isnan(table.values))],
        "points": points,
        "means": _nested(median_imputed(oriented)),
        "better": better,
        "ties": ties,
        "rules": list(LIVE_RULES),
        "initial": [initial[g] for g in groups],
    }


def _nested(a: np.ndarray) -> list[list[float | None]]:
    return [[None if np.isnan(v) else float(v) for v in row] for row in np.asarray(a, dtype=float)]


def live_script() -> str:
    """The page's script (``live_weights.js`` beside this module)."""
    return resources.files("ranking.scenarios").joinpath("live_weights.js").read_text(encoding="utf-8")


#: Characters that may not appear raw in JSON inside a ``<script>`` element: ``<`` and ``>`` (``</script>``,
#: ``<!--``, ``<script`` change how the HTML parser reads the element), ``&``, and the line and paragraph
#: separators (line ends for old JavaScript). JSON reads the ``\\uXXXX`` escapes back as the same text.
_SCRIPT_UNSAFE = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_SCRIPT_TRANSLATION = str.maketrans(_SCRIPT_UNSAFE)


def live_json(data: Mapping[str, Any]) -> str:
    """``data`` as JSON safe inside ``<script type="application/json">``: any model or criterion name
    (``</script>``, ``<!--<script>``, ...) stays text in the JSON and leaves the page's structure alone.

    >>> live_json({"models": ["<!--<script>", "a&b\u2028"]})
    '{"models":["\\\\u003c!--\\\\u003cscript\\\\u003e","a\\\\u0026b\\\\u2028"]}'
    """
    text = json.dumps(data, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
    return text.translate(_SCRIPT_TRANSLATION)
