"""The ground floor both packages stand on: what every input and output of the project goes through.

* :mod:`ranking.floor.errors`: :class:`~ranking.floor.errors.UserError` (bad input: one line, exit 2) and the
  one-line wording of a failed file operation;
* :mod:`ranking.floor.paths`: the data root (``--data-root``, else ``$VNR_DATA_ROOT``), output folders checked
  before work (and :func:`~ranking.floor.paths.folder`, the argparse type of a folder option), the one atomic
  writer (:func:`~ranking.floor.paths.write_atomic`) every run record, result, sidecar and report goes through;
* :mod:`ranking.floor.schema`: the one schema core: the field markers every declared input uses (``Number``,
  ``Text``, ``Check``, ...), one ``validate`` for pydantic models and declared dataclasses, and the one
  translator of a refusal into one line (``where: key.path: what is wrong — what to write instead``), for the
  harness's configs, specs and calibration files and the ranking side's sidecars, leaderboard specs and
  scenarios alike;
* :mod:`ranking.floor.flags`: command-line flags generated from declared fields (a run kind's spec, the grid's
  settings, a ranking's choices), each flag's help and check its field's own;
* :mod:`ranking.floor.yaml_io`: the one YAML loader (YAML 1.2 scalars, duplicate keys and aliases refused,
  errors that never print an unbounded value).

Why here: the top level of the project is fixed (``harness``, ``ranking``, ...), so the floor is a
sub-package of one of them. The harness already stands on ``ranking`` (it collects into score tables, prints
them and names the presets), and ``ranking`` must never import the harness (it runs on a laptop with numpy,
pandas and scipy, no torch). Under ``ranking`` the house has every arrow pointing one way: ``harness`` →
``ranking`` → ``ranking.floor``. (It sat under ``harness`` for one stop, which made ``ranking`` import
``harness``: an arrow running back up.) Importing it costs nothing: the floor imports only the standard library
(``yaml`` inside the loader, ``pydantic`` inside the schema core's functions), never numpy, pandas, the rest of
``ranking`` or ``harness``; ``tests/test_imports.py`` holds both sides to it. The maintainer's map of the whole house (where
each kind of thing goes, how a value flows, what the architecture tests hold) is this folder's README.md.
"""
