"""User scenarios: rank a performance / efficiency / fairness matrix under a user's weights.

A scenario YAML (``configs/scenarios/*.yaml``) says which criteria form which
group, each criterion's own weight, direction overrides, and the columns to
compare (a rule, a setting and group weights each), one of them the reference.

- :mod:`ranking.scenarios.scenario` parses and validates the YAML and turns a
  score table into the scenario's table (groups, weights, directions).
- :mod:`ranking.scenarios.casestudy` imports the Vote'n'Rank case study CSVs.
- :mod:`ranking.scenarios.compare` runs the columns and formats the comparison.
- :mod:`ranking.scenarios.simplex` maps the winner over the group-weight triangle.
- :mod:`ranking.scenarios.whatif` finds the nearest group weights that make a model win.
- :mod:`ranking.scenarios.bootstrap` resamples seeds into rank probabilities.
- :mod:`ranking.scenarios.report` writes the self-contained HTML report.
"""

from typing import Any

__all__ = ["Column", "GroupSpec", "Scenario", "load_scenario"]


def __getattr__(name: str) -> Any:
    """``Column``, ``GroupSpec``, ``Scenario`` and ``load_scenario`` from :mod:`.scenario`, imported on first use
    (so ``vnr report --help`` does not import numpy)."""
    if name in __all__:
        from ranking.scenarios import scenario

        return getattr(scenario, name)
    raise AttributeError(f"module 'ranking.scenarios' has no attribute {name!r}")
