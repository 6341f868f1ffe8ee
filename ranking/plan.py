"""The plan of a ranking: every choice of :func:`ranking.rank` resolved once, then applied to tables.

:func:`ranking.rank` (``vnr rank``) is ``apply_plan(RankPlan.build(...), table)``
(:func:`ranking.api.apply_plan`). Everything else in the project that ranks — a scenario's columns, the weight simplex, what-if, the seed / standard-error
bootstraps, rank intervals, the fewest changes to win and the analyses — holds a :class:`RankPlan` too
and ranks through it, so no path can apply a default (a preset's tie convention, its divisor of the
weighted setting, its optimality-gap gamma, dropping incomplete rows, one vote per benchmark) that
another forgets.

A plan is applied in two steps:

1. :meth:`RankPlan.prepare` — once per table: the rows the preset ranks (``drop_incomplete``: the
   complete rows only) and the weights of the vote mode (:mod:`ranking.votes`), giving a
   :class:`Prepared` table;
2. :meth:`RankPlan.run_rule` — as often as needed: one rule under the plan's setting, preset, tie
   convention and parameters on a prepared table, or on a table derived from one by new values
   (a bootstrap draw, a changed cell of the fewest changes to win) or a subset of rows (an
   analysis), optionally under other group weights (a point of the weight simplex). The
   orientation (directions, targets) is the table's criteria's, which every rule reads.

Never prepare a prepared table again: one vote per benchmark divides a benchmark's weight among its
columns, and dividing twice would change it.

**The declaration.** :class:`RankPlan`'s choice fields, with the floor's markers (type, bound, default,
:class:`~ranking.floor.schema.Help`, :class:`~ranking.floor.flags.Cli` and :class:`~ranking.choices.On`: where
the choice is given; the annotated types live in the leaf module :mod:`ranking.choices`), are the ONE declaration of a ranking's choices: :func:`check_choices` validates them once, where they
enter (``ranking.rank``'s keywords, ``RankPlan.build``, ``vnr rank``/``report``/``analyze``/``prospective``'s
flags, a scenario's keys), so a bad value reads the same everywhere (``draws: 1000000000 is above 100000``,
``--draws: ...``, ``x.yaml: ...``); the flags are generated from it (:func:`ranking.floor.flags.add_flags`),
``ranking.rank``'s signature too (:func:`choice_signature`).

The vectorised paths take what they compute from the plan too: the weight simplex and what-if build
their linear basis from :meth:`RankPlan.run_rule` at the corners (checked at probe points), and the
rank intervals' batch scorers score :meth:`RankPlan.effective_table`, the very table whose weights a
rule sees under ``basic`` or ``weighted``.

>>> from ranking.rules import worked_example
>>> plan = RankPlan.build(["borda", "copeland"])
>>> plan.rules, plan.setting, plan.ties, plan.preset, plan.vote, plan.drop_incomplete
(('borda', 'copeland'), 'basic', 'default', 'default', 'benchmark', False)
>>> prepared = plan.prepare(worked_example())
>>> plan.run_rule(prepared.table, "borda").scores.tolist()
[6.0, 9.0, 8.0, 7.0]
>>> from ranking.api import apply_plan
>>> apply_plan(plan, worked_example()).winners
{'borda': ('B',), 'copeland': ('B',)}
>>> votenrank = RankPlan.build("optimality_gap", preset="votenrank")
>>> votenrank.ties, votenrank.drop_incomplete, votenrank.rule_params("optimality_gap")
('votenrank', True, {'gamma': 0.95})
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from ranking.choices import (  # noqa: F401 - the declared types of RankPlan's fields, and what other modules read
    DEFAULT_DRAWS,
    MAX_CELLS,
    MAX_DRAWS,
    MAX_SEED,
    MIN_DRAWS,
    PRESETS,
    SETTINGS,
    TIES,
    VOTES,
    BoardChoice,
    DrawsChoice,
    DropIncompleteChoice,
    GroupWeightsChoice,
    IntervalsChoice,
    LevelChoice,
    MaxCellsChoice,
    OgGammaChoice,
    On,
    PresetChoice,
    RobustnessChoice,
    SeedChoice,
    SeedsChoice,
    SettingChoice,
    TiesChoice,
    VoteChoice,
)
from ranking.floor.errors import UserError

if TYPE_CHECKING:  # the heavy modules are imported where a plan is applied, not where it is declared
    from ranking.result import RuleResult
    from ranking.settings import Preset
    from ranking.table import ScoreTable


@dataclass(frozen=True)
class Prepared:
    """A table as a plan ranks it (:meth:`RankPlan.prepare`)."""

    #: what the rules see: the complete rows where the plan drops incomplete ones, weights under the vote mode
    table: ScoreTable
    #: the same rows with the table's own weights (the leaderboard's own order reads it)
    unvoted: ScoreTable
    #: the models left out for missing a score (None where the plan does not drop incomplete rows)
    dropped: list[str] | None
    #: what the output states about the vote (:func:`ranking.votes.apply_votes`)
    votes: dict[str, Any]


def used_settings(
    table: ScoreTable,
    setting: str,
    ties: str | None,
    group_weights: Mapping[str, float] | None,
    *,
    preset: str | None = None,
    og_gamma: float | None = None,
) -> dict[str, Any]:
    """The preferences a ranking used, stated in full.

    ``preset`` (its name, ``default`` when none is given) and ``ties`` (the
    tie convention in effect: the preset's unless given); ``directions`` and
    ``criterion_weights`` per criterion; ``groups`` per criterion (None where
    it has none); ``group_weights`` (weighted / two-step, every group's weight
    after defaults; None under basic); under ``weighted`` also
    ``effective_weights``, each criterion's weight after the group weights are
    applied (what the rules actually use, with the preset's divisor). With
    ``og_gamma`` given (the optimality gap was ranked) also ``og_gamma``.
    """
    from ranking.settings import get_preset, resolve_group_weights, weighted_table

    conv = get_preset(preset)
    out: dict[str, Any] = {
        "setting": setting,
        "preset": conv.name,
        "ties": conv.ties if ties is None else ties,
        "directions": {c.name: c.direction for c in table.criteria},
        **({"targets": {c.name: c.target for c in table.criteria if c.direction == "target"}}
           if any(c.direction == "target" for c in table.criteria) else {}),
        "criterion_weights": {c.name: c.weight for c in table.criteria},
        "groups": {c.name: c.group for c in table.criteria},
        "group_weights": None,
    }
    if setting != "basic":
        gw = resolve_group_weights(table, group_weights)
        out["group_weights"] = gw
        if setting == "weighted":
            effective = weighted_table(table, gw, divisor=conv.weighted_divisor).weights.tolist()
            out["effective_weights"] = dict(zip(table.names, effective))
    if og_gamma is not None:
        out["og_gamma"] = og_gamma
    return out


def resolve_rule_names(rule: str | Sequence[str]) -> tuple[tuple[str, ...], bool]:
    """(rule names, whether they were named rather than ``"all"``); an unknown name is a :class:`UserError`."""
    from ranking.rules import rule_names

    requested = [rule] if isinstance(rule, str) else list(rule)
    known = rule_names()
    names: list[str] = []
    for name in requested or ["all"]:
        for n in known if name == "all" else [name]:
            if n not in known:
                raise UserError(f"unknown rule {n!r} (rules: {', '.join(known)}, all)")
            if n not in names:
                names.append(n)
    return tuple(names), bool(requested) and "all" not in requested


@dataclass(frozen=True)
class RankPlan:
    """The resolved choices of a ranking (module docstring); build one with :meth:`build`.

    The fields from ``setting`` on are THE declaration of a ranking's choices: their types, bounds, defaults
    and help are what ``ranking.rank`` checks its keywords against, what ``vnr rank`` (and ``report``,
    ``analyze``, ``prospective``) generates its flags from and what a scenario's keys are typed with."""

    rules: tuple[str, ...] = ()
    explicit: bool = False  # rules named: one that cannot rank raises; under "all" it is skipped
    setting: SettingChoice = "basic"
    group_weights: GroupWeightsChoice = None
    ties: TiesChoice = None
    preset: PresetChoice = None
    og_gamma: OgGammaChoice = None
    params: Mapping[str, Any] = field(default_factory=dict)  # to every rule (atol, missing, nonpositive)
    drop_incomplete: DropIncompleteChoice = None
    vote: VoteChoice = "benchmark"
    board: BoardChoice = False
    intervals: IntervalsChoice = False
    level: LevelChoice = 0.95
    draws: DrawsChoice = None
    seed: SeedChoice = 0
    seeds: SeedsChoice = None
    robustness: RobustnessChoice = False
    max_cells: MaxCellsChoice = 3

    def __post_init__(self) -> None:
        # the preset's defaults where a choice is left to it (a plan always holds the conventions in force)
        from ranking.settings import get_preset

        conv = get_preset(self.preset)
        object.__setattr__(self, "preset", conv.name)
        if self.ties is None:
            object.__setattr__(self, "ties", conv.ties)
        if self.drop_incomplete is None:
            object.__setattr__(self, "drop_incomplete", conv.drop_incomplete)

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, rule: str | Sequence[str] = "all", **choices: Any) -> RankPlan:
        """The plan of these choices (the keywords of :func:`ranking.rank`: :data:`CHOICES`, and rule parameters),
        checked once against the declaration, every default resolved."""
        return cls.from_choices(rule, choices)

    @classmethod
    def from_choices(cls, rule: str | Sequence[str], choices: Mapping[str, Any], *, where: Any = None,
                     names: Any = None) -> RankPlan:
        """:meth:`build` with the choices as a mapping; a refusal names ``where`` (a file) or the flag
        ``names(field)`` gives (a command's), else the keyword."""
        names_, explicit = resolve_rule_names(rule)
        given = {k: v for k, v in choices.items() if k in CHOICES and v is not None}  # None: the declared default
        params = {k: v for k, v in choices.items() if k not in CHOICES}
        if "gamma" in params:  # one spelling: og_gamma (a second one gave a second answer)
            raise UserError(f"gamma: write og_gamma={params['gamma']!r} (the optimality gap's gamma has one "
                            "keyword)")
        return cls(rules=names_, explicit=explicit, params=params,
                   **check_choices(given, where=where, names=names))

    def with_(self, **changes: Any) -> RankPlan:
        """This plan with some fields changed (e.g. ``rules=("borda",)``, ``group_weights=...``)."""
        return replace(self, **changes)

    @property
    def conventions(self) -> Preset:
        from ranking.settings import get_preset

        return get_preset(self.preset)

    def rule_params(self, rule: str) -> dict[str, Any]:
        """The parameters ``rule`` runs with: the plan's, ``og_gamma`` for the optimality gap, the preset's."""
        from ranking.settings import preset_params

        extra = {"gamma": self.og_gamma} if rule == "optimality_gap" and self.og_gamma is not None else {}
        return preset_params(rule, self.conventions, {**self.params, **extra})

    @property
    def gamma(self) -> float | None:
        """The optimality gap's gamma in force (None when that rule is not ranked): stated in the settings."""
        if "optimality_gap" not in self.rules:
            return None
        return self.og_gamma if self.og_gamma is not None else self.params.get("gamma", self.conventions.og_gamma)

    # ------------------------------------------------------------------ applying
    def prepare(self, table: ScoreTable) -> Prepared:
        """The rows the plan ranks and their weights under its vote mode (once per table)."""
        from ranking.votes import apply_votes

        dropped: list[str] | None = None
        if self.drop_incomplete:
            table, dropped = table.complete_rows()
        voted, votes = apply_votes(table, self.vote)
        return Prepared(voted, table, dropped, votes)

    def run_rule(self, table: ScoreTable, rule: str, *, group_weights: Mapping[str, float] | None = None
                 ) -> RuleResult:
        """``rule`` on a prepared ``table`` (or one derived from it by values or rows) under the plan's setting,
        preset, ties and parameters; ``group_weights`` replace the plan's (a point of the weight simplex)."""
        from ranking.settings import apply_setting

        gw = self.group_weights if group_weights is None else group_weights
        return apply_setting(table, rule, setting=self.setting, group_weights=gw, ties=self.ties, preset=self.preset,
                             **self.rule_params(rule))

    def effective_table(self, table: ScoreTable, group_weights: Mapping[str, float] | None = None
                        ) -> ScoreTable | None:
        """The prepared ``table`` with the weights a rule sees under the plan's setting: the table itself under
        ``basic``, the weighted setting's table under ``weighted``; None under ``two-step`` (no single table)."""
        if self.setting == "basic":
            return table
        if self.setting == "weighted":
            from ranking.settings import resolve_group_weights, weighted_table

            gw = resolve_group_weights(table, self.group_weights if group_weights is None else group_weights)
            return weighted_table(table, gw, divisor=self.conventions.weighted_divisor)
        return None

    def rank_kwargs(self) -> dict[str, Any]:
        """The plan's group weights, ties, preset and parameters as keyword arguments of :meth:`build` (what the
        intervals' batch scorers read: the tie convention, ``atol``)."""
        return {"group_weights": self.group_weights, "ties": self.ties, "preset": self.preset, **self.params}

    def used_settings(self, prepared: Prepared) -> dict[str, Any]:
        """The settings a ranking states (:func:`used_settings`, the vote, the dropped models);
        checks the group weights against the table."""
        from ranking.votes import changes_weights

        out = used_settings(prepared.table, self.setting, self.ties, self.group_weights, preset=self.preset,
                            og_gamma=self.gamma)
        if changes_weights(prepared.votes):
            out["votes"] = prepared.votes  # stated where the vote mode changes the weights
        if prepared.dropped is not None:
            out["dropped_incomplete"] = prepared.dropped
        return out


# ---------------------------------------------------------------------------- the declaration, read
#: The declared choices (the keywords of ``ranking.rank`` besides the rule and the rules' own parameters).
CHOICES = tuple(f.name for f in fields(RankPlan) if f.name not in ("rules", "explicit", "params"))


@functools.cache
def choice_hints() -> dict[str, Any]:
    """Choice → its declared type (``Annotated`` with its markers)."""
    hints = typing.get_type_hints(RankPlan, include_extras=True)
    return {name: hints[name] for name in CHOICES}


def on(surface: str) -> tuple[str, ...]:
    """The choices given on ``surface`` (a command, ``scenario`` or ``column``: :class:`On`)."""
    return tuple(name for name, hint in choice_hints().items()
                 if any(isinstance(m, On) and surface in m.surfaces for m in getattr(hint, "__metadata__", ())))


def choice_help(name: str) -> str:
    """The declared help text of a choice."""
    from ranking.floor.schema import description

    return description(choice_hints()[name]) or name


def check_choices(choices: Mapping[str, Any], *, where: Any = None, names: Any = None) -> dict[str, Any]:
    """The given ``choices`` validated against the declaration, once (an unknown one, a value out of its bound, or
    group weights under the basic setting: one :class:`UserError` line naming ``where``/the flag/the keyword).

    >>> check_choices({"draws": "200", "seed": 3})
    {'draws': 200, 'seed': 3}
    >>> check_choices({"draws": 10**18})
    Traceback (most recent call last):
    ...
    ranking.floor.errors.UserError: draws: 1000000000000000000 is above 100000
    """
    if not choices:
        return {}  # nothing given: the declared defaults (and no schema to build)
    if where is None and names is None:  # the API's: the same choices check alike, so a repeated call is looked up
        key = tuple((k, type(v), v) for k, v in choices.items())
        try:
            return dict(_checked(key))
        except TypeError:  # unhashable (group weights as a mapping): checked below
            pass
    return _check_choices(choices, where, names)


@functools.lru_cache(maxsize=256)
def _checked(key: tuple[tuple[str, type, Any], ...]) -> tuple[tuple[str, Any], ...]:
    return tuple(_check_choices({k: v for k, _, v in key}, None, None).items())


def _check_choices(choices: Mapping[str, Any], where: Any, names: Any) -> dict[str, Any]:
    from ranking.floor.schema import fields_model, validate

    model = fields_model(RankPlan, exclude=("rules", "explicit", "params"))
    checked = validate(model, dict(choices), where=where, names=names)
    out = {name: getattr(checked, name) for name in CHOICES if name in checked.model_fields_set}
    if out.get("group_weights") and out.get("setting", "basic") == "basic":
        flag = names("group_weights") if names else "group_weights"
        prefix = f"{where}: " if where else ""
        raise UserError(f"{prefix}{flag}: group weights only apply with the weighted or two-step setting, not basic")
    return out


def choice_signature(*head: inspect.Parameter) -> inspect.Signature:
    """The signature of a function that takes the declared choices as keywords after ``head`` (``ranking.rank``:
    the table and the rule), and the rules' own parameters (``**params``): what ``help()`` and an editor show."""
    keywords = [inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default)
                for f in fields(RankPlan) if f.name in CHOICES]
    return inspect.Signature([*head, *keywords, inspect.Parameter("params", inspect.Parameter.VAR_KEYWORD)])


# help() and editors show the declared choices as RankPlan.build's keywords (ranking.rank's: ranking.api)
RankPlan.build.__func__.__signature__ = choice_signature(  # type: ignore[attr-defined]
    inspect.Parameter("cls", inspect.Parameter.POSITIONAL_OR_KEYWORD),
    inspect.Parameter("rule", inspect.Parameter.POSITIONAL_OR_KEYWORD, default="all"))
