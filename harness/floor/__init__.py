"""The ground floor both packages stand on: what every input and output of the project goes through.

* :mod:`harness.floor.errors`: :class:`~harness.floor.errors.UserError` (bad input: one line, exit 2) and the
  one-line wording of a failed file operation;
* :mod:`harness.floor.paths`: the data root (``--data-root``, else ``$VNR_DATA_ROOT``), output folders checked
  before work (and :func:`~harness.floor.paths.folder`, the argparse type of a folder option), the one atomic
  writer (:func:`~harness.floor.paths.write_atomic`) every run record, result, sidecar and report goes through;
* :mod:`harness.floor.schema`: the one schema core: the field markers every declared input uses (``Number``,
  ``Text``, ``Check``, ...), one ``validate`` for pydantic models and declared dataclasses, and the one
  translator of a refusal into one line (``where: key.path: what is wrong — what to write instead``), for the
  harness's configs, specs and calibration files and the ranking side's sidecars, leaderboard specs and
  scenarios alike;
* :mod:`harness.floor.yaml_io`: the one YAML loader (YAML 1.2 scalars, duplicate keys and aliases refused,
  errors that never print an unbounded value).

Why here: the top level of the project is fixed (``harness``, ``ranking``, ...), so the floor is a
sub-package of one of them. It used to be ``ranking`` (``ranking.errors``/``ranking.paths``), which made the
harness import the ranking package for its utilities. It sits under ``harness`` instead because importing it
costs nothing: ``harness/__init__.py`` is lazy and the floor imports only the standard library (``yaml`` inside
the loader, ``pydantic`` inside the schema core's functions), never torch, pandas, the rest of ``harness`` or ``ranking``. So ``ranking`` keeps the
promise the design makes for it (it runs on a laptop with numpy, pandas and scipy; it imports nothing of the
harness but this floor: ``tests/test_imports.py`` holds both sides to it).
"""
