"""The declared ranking choices: each choice's type, bound, help and surfaces (:class:`On`), the allowed values and
the bounds of the counts — the declaration :class:`ranking.plan.RankPlan`'s fields are annotated with.

A leaf module (it imports only the floor), so the engine (:mod:`ranking.rules`, :mod:`ranking.settings`), the
scenario schema (:mod:`ranking.schemas`) and the commands' flags read the one declaration without an import
cycle, and ``vnr --help`` stays light.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from ranking.floor.flags import Cli
from ranking.floor.schema import Before, Flag, Help, Number, Refusal

# ---------------------------------------------------------------------------- the allowed values and bounds
SETTINGS = ("basic", "weighted", "two-step")
TIES = ("default", "votenrank")
PRESETS = ("default", "votenrank")  # the names of ranking.settings.PRESETS (tested equal)
VOTES = ("benchmark", "column")
#: Drawn tables of the rank intervals: fewer than 20 cannot estimate a 95% quantile; beyond 100 000 the
#: simultaneous level is estimated to about ±0.001 already, and the draws' scores (draws × models × rules
#: floats) would run into gigabytes, so a larger number (``--draws 1e9``) is a typo, refused before any allocation.
DEFAULT_DRAWS, MIN_DRAWS, MAX_DRAWS = 1000, 20, 100_000
#: The largest seed: numpy's generators take any non-negative integer; 2**32-1 is what every other seed of the
#: project (the harness's run seeds) takes.
MAX_SEED = 2**32 - 1
#: The deepest search of the fewest changes to win: the means are exact at any depth, the order-based rules'
#: search has a budget of re-rankings (ranking.robustness), so a deeper one is a typo.
MAX_CELLS = 1000


class On:
    """Where a choice is given besides ``ranking.rank``'s keyword and :meth:`RankPlan.build`: the commands whose
    flags it is (``rank``, ``report``, ``analyze``, ``prospective``), ``scenario`` (a scenario file's top key) and
    ``column`` (a key of a scenario's ``columns:`` entries)."""

    def __init__(self, *surfaces: str) -> None:
        self.surfaces = surfaces


def _group_weights(value: Any) -> Any:
    """Group weights from a mapping (``{performance: 0.4}``; a weight may be a fraction, ``1/2``) or from text
    (``performance=0.4,efficiency=0.3``, the flag's), each a finite number >= 0, no group twice.

    >>> _group_weights("performance=0.4, fairness=1/2")
    {'performance': 0.4, 'fairness': 0.5}
    >>> _group_weights("performance")
    Traceback (most recent call last):
    ...
    ValueError: 'performance' is not GROUP=WEIGHT
    """
    if value is None:
        return None
    if isinstance(value, str):
        pairs = []
        for item in (i.strip() for i in value.split(",")):
            if not item:
                continue
            name, sep, weight = item.partition("=")
            if not sep or not name.strip():
                raise ValueError(f"{item!r} is not GROUP=WEIGHT")
            if any(name.strip() == n for n, _ in pairs):
                raise Refusal(f"group {name.strip()!r} given twice", at=(name.strip(),))
            pairs.append((name.strip(), weight))
        value = dict(pairs)
    if not isinstance(value, Mapping):
        raise ValueError(f"{value!r} is not a mapping of group weights — write e.g. {{performance: 0.4}}")
    return {str(name): _group_weight(str(name), weight) for name, weight in value.items()}


def _group_weight(name: str, value: Any) -> float:
    """One group's weight: a finite number >= 0, given as a number or as text (``0.4``, ``1/2``)."""
    from fractions import Fraction

    from ranking.floor.schema import show

    try:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise ValueError
        weight = float(Fraction(value.strip()) if isinstance(value, str) else value)
    except (ValueError, ZeroDivisionError, OverflowError):
        raise Refusal(f"{show(value)} is not a number — write e.g. 0.4 or 1/2", at=(name,)) from None
    if not math.isfinite(weight) or weight < 0:
        raise Refusal(f"{show(weight)} must be a finite number >= 0", at=(name,))
    return weight


Setting = Literal[SETTINGS]  # type: ignore[valid-type]
Ties = Literal[TIES]  # type: ignore[valid-type]
PresetName = Literal[PRESETS]  # type: ignore[valid-type]
Vote = Literal[VOTES]  # type: ignore[valid-type]
GroupWeights = Annotated[Any, Before(_group_weights)]


# ---------------------------------------------------------------------------- the choices, one type each
# Each: its type and bound (the floor's Number, Literal, Flag, Before), its Help (the flag's help, the scenario
# key's description, what a refusal says to write), its flag where not --field-name (Cli) and where it is given
# besides ranking.rank's keywords (On). Its default is RankPlan's field's (ranking/plan.py).
SettingChoice = Annotated[Setting, Help(
    "aggregation setting: basic (each criterion's own weight), weighted (group weights spread over their "
    "criteria) or two-step (rank inside each group, then the groups)"),
    On("rank", "analyze", "column")]
GroupWeightsChoice = Annotated[GroupWeights, Help(
    "group weights for the weighted and two-step settings, e.g. performance=0.4,efficiency=0.3 (default: 1 for "
    "every group)"),
    Cli(metavar="G=W,..."), On("rank", "column")]
TiesChoice = Annotated[Ties | None, Help(
    "tie convention of the positional rules: default or votenrank (default: the preset's)"),
    On("rank", "scenario", "column")]
PresetChoice = Annotated[PresetName | None, Help(
    "conventions: default (principled) or votenrank (reproduces the paper's numbers: votenrank ties, weighted "
    "divides by the group's number of columns, optimality gap gamma 0.95, geometric mean 0 for a score <= 0, "
    "prospective systems over every column among the models with every score)"),
    On("rank", "prospective", "scenario")]
OgGammaChoice = Annotated[float | None, Number(gt=0), Help(
    "optimality_gap's gamma on the 0-1 scale, a finite number > 0 (0.95 = 95 on a 0-100 scale; default: the "
    "preset's, 1 or 0.95)"),
    Cli(metavar="G"), On("rank", "scenario")]
DropIncompleteChoice = Annotated[bool | None, Flag(), Help(
    "rank only the models with every score (default: the preset's; votenrank: yes, as the paper); "
    "--keep-incomplete ranks every model, a missing score skipped"),
    Cli(negative="--keep-incomplete"), On("rank", "prospective")]
VoteChoice = Annotated[Vote, Help(
    "benchmark: each benchmark casts one vote, whatever number of subtasks or metrics its columns report "
    "(detail columns and weight-0 columns do not vote); column: every column votes (an aggregate gives way to "
    "its ranked parts)"),
    On("rank", "analyze", "prospective", "scenario")]
BoardChoice = Annotated[bool, Flag(), Help(
    "also rank by the leaderboard's own aggregate (HELM mean win rate, the Open LLM Leaderboard's average, "
    "MTEB's mean, lm-eval's group means) for an imported table"),
    On("rank")]
IntervalsChoice = Annotated[bool, Flag(), Help(
    "rank intervals that hold for all models at once, and tiers of models the data cannot separate, from the "
    "table's standard errors (stderr.csv) or its seeds (seeds.csv beside it)"),
    On("rank", "report")]
LevelChoice = Annotated[float, Number(ge=0.5, lt=1.0), Help(
    "the simultaneous level of the rank intervals, at least 0.5 and below 1"),
    Cli(metavar="P", needs="intervals"), On("rank", "report")]
DrawsChoice = Annotated[int | None, Number(ge=MIN_DRAWS, le=MAX_DRAWS), Help(
    f"how many tables the rank intervals draw from the uncertainty, {MIN_DRAWS} to {MAX_DRAWS} (default "
    f"{DEFAULT_DRAWS})"),
    Cli(metavar="N", needs="intervals"), On("rank", "report")]
SeedChoice = Annotated[int, Number(ge=0, le=MAX_SEED), Help(
    "random seed of the draws (--intervals), of the bootstrap (a scenario) or of an analysis, 0 to 2**32-1"),
    Cli(metavar="N"), On("rank", "report", "analyze")]
SeedsChoice = Annotated[Any, Help(
    "a seeds.csv the rank intervals draw from (default: the one beside the table's CSV)"),
    On()]
RobustnessChoice = Annotated[bool, Flag(), Help(
    "per rule and model: the fewest scores that must change for it to win, and which"),
    On("rank", "report")]
MaxCellsChoice = Annotated[int, Number(ge=1, le=MAX_CELLS), Help(
    f"how many changed scores the search for the fewest changes to win goes up to, 1 to {MAX_CELLS} (the means "
    "are exact at any number)"),
    Cli(metavar="K", needs="robustness"), On("rank", "report")]
