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

from ranking.scenarios.scenario import Column, GroupSpec, Scenario, load_scenario

__all__ = ["Column", "GroupSpec", "Scenario", "load_scenario"]
