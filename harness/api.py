"""The Python API: the functions the ``vnr`` CLI calls, for notebooks and scripts.

::

    import harness
    rec = harness.finetune("tiny:bert", "rte", seed=0, output="results/nb", max_steps=20)
    rec["metrics"]                                   # {'accuracy': ...}
    bias = harness.score_bias("tiny:gpt2", "crows_pairs", output="results/nb", limit=50)
    outcomes = harness.run_grid("configs/experiments/smoke.yaml")

Every function returns the run's record (the dict stored in ``<output>/runs/<run_id>.json``), or for a
grid one outcome per spec. ``data_root=None`` means the same everywhere: ``$VNR_DATA_ROOT`` if set, else
the public source; it is resolved here, once, by :func:`ranking.floor.paths.resolve_data_root`. Bad input raises
:class:`ranking.floor.errors.UserError` (the CLI turns it into one line and exit 2). Nothing heavy is imported
until a function runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.finetune.api import finetune
from ranking.floor.errors import UserError

__all__ = ["finetune", "run_grid", "score_bias"]


def score_bias(
    model: Any,
    dataset: str | None = None,
    *,
    output: str | Path = "results/bias",
    data_root: str | Path | None = None,
    progress: bool = False,
    **given: Any,
) -> dict[str, Any]:
    """Score ``model`` zero-shot on a bias benchmark (``crows_pairs``, ``stereoset``, ``winobias``).

    Returns the run's record (metrics overall and per bias type, the scoring precision); the per-example
    scores are saved beside it (``runs/<run_id>.examples.parquet``). ``given`` takes every key a grid config
    takes: the fields of :class:`~harness.specs.BiasSpec` (``limit``, ``precision``, ``model_args``,
    ``scoring``) and the run options of :class:`~harness.specs.BiasRunOptions` (``batch_tokens``).
    ``precision`` is fp32 (exact) unless you ask for ``bf16``/``fp16``/``auto``. ``scoring`` is ``default``
    (the harness's definitions), ``reference`` (the published scripts', as ``vnr bias --scoring reference``) or
    ``votenrank`` (the Vote'n'Rank authors' fairness computation, :mod:`harness.bias.votenrank`). ``model``
    may also be a ready :class:`~harness.specs.BiasSpec`.
    """
    from harness.kinds import get_kind, spec_kind
    from harness.schema import output_path
    from ranking.floor.paths import resolve_data_root

    where = "harness.score_bias"
    kind = get_kind("bias")
    if spec_kind(model) is kind:
        if dataset is not None:
            raise UserError(f"{where}(spec): give either a BiasSpec or model, dataset and options")
        spec, options = kind.prepare(model, given, where=where)
    else:
        if dataset is None:
            raise UserError(f"{where}: which dataset? crows_pairs, stereoset or winobias")
        spec, options = kind.prepare(None, {"model": model, "dataset": dataset, **given}, where=where)
    return kind.run_function()(spec, output_path(output, f"{where}: output"), data_root=resolve_data_root(data_root),
                               progress=bool(progress), **options.given())


def run_grid(
    config: str | Path,
    *,
    output: str | Path | None = None,
    data_root: str | Path | None = None,
    only: Sequence[str] | None = None,
    progress: bool = False,
    isolate: bool = False,
    check: bool = True,
    runs_per_gpu: int | str | None = None,
    calibrate: bool | None = None,
    calibration_budget_s: float | None = None,
    gpus: Any = None,
    fuse: int | str | None = None,
    capture: str | None = None,
    decide: Any = None,
) -> list[Any]:
    """Run an experiment config's grid locally (finished runs skipped) and return one outcome per spec.

    ``decide`` (a mapping of :class:`~harness.grid.settings.DecideSettings` fields, e.g. ``{"scenario":
    "configs/scenarios/user_weighted.yaml", "decision": "top", "top": 3}``, over the config's ``decide:``): run in
    waves until the scenario's decision is settled (:mod:`harness.grid.decide`); the outcomes are those of the
    runs the waves ran, and ``harness.grid.decide.read_state(output)["report"]`` holds the decision.

    ``runs_per_gpu`` (N or ``"auto"``; default: the config's ``local:``, else auto where a GPU is used),
    ``calibrate`` (False: no calibration bursts), ``calibration_budget_s`` and ``gpus`` (GPU indices or a
    count) as ``vnr run``'s ``--runs-per-gpu``, ``--calibrate`` / ``--no-calibrate``,
    ``--calibration-budget-s`` and ``--local-gpus``, and ``fuse`` (K, ``"auto"`` or ``"off"``: ``--fuse``; the
    runs of a cell that differ only in seed, learning rate or weight decay trained as one stacked model,
    :mod:`harness.finetune.fused`) and
    ``capture`` (``"auto"``, ``"on"`` or ``"off"``: ``--capture``; a fused group's whole step captured and
    replayed): the fields of :class:`~harness.grid.settings.LocalSettings`,
    checked by their declaration, over the config's ``local:`` (None: the config's;
    :func:`harness.grid.calibrate.local_packing`).

    Each outcome has ``run_id``, ``status`` and ``error``; read the results with
    :class:`harness.store.RunStore` on the experiment's output. ``check`` first makes sure, when the hub
    cannot be reached, that every model and dataset the grid needs is on disk
    (:func:`harness.prefetch.check_available`).
    """
    from dataclasses import replace

    from harness.grid.config import load_experiment, select_specs
    from harness.grid.local import execute
    from harness.grid.settings import LocalSettings
    from ranking.floor.paths import resolve_data_root
    from ranking.floor.schema import validate

    given = {key: value for key, value in (("runs_per_gpu", runs_per_gpu), ("calibrate", calibrate),
                                           ("calibration_budget_s", calibration_budget_s), ("gpus", gpus),
                                           ("fuse", fuse), ("capture", capture))
             if value is not None}
    flags = validate(LocalSettings, given, names=lambda name: name)  # as the config's local: keys
    exp = load_experiment(config, output=output)
    exp = replace(exp, local=replace(exp.local, **{key: getattr(flags, key) for key in given}))
    from harness.grid.decide import settings_of

    deciding = settings_of(exp, decide)  # checked by the declaration, as the config's decide: keys
    specs = select_specs(exp.specs, list(only) if only else None)
    root = resolve_data_root(data_root)
    if check:
        from harness.prefetch import check_available

        check_available(exp, specs=specs, data_root=root, config=str(config))
    from harness.grid.calibrate import local_packing
    from harness.store import RunStore

    store = RunStore(exp.output)
    pending = [s for s in specs if not store.is_done(s)]
    plan, packing = local_packing(exp, specs, pending, data_root=root)
    if deciding is not None:
        from harness.grid.decide import run_local

        if only:
            raise UserError("only= selects part of the grid, and decide= decides on the whole grid: leave one out")
        outcomes: list[Any] = []

        def wave(todo: list[Any]) -> list[Any]:
            done = execute(todo, exp.output, data_root=root, progress=progress, isolate=isolate,
                           options=lambda s: {**exp.options_for(s), **plan.options(s)}, **packing)
            outcomes.extend(done)
            return done

        run_local(exp, deciding, execute_wave=wave, echo=lambda text: None)
        return outcomes
    return execute(specs, exp.output, data_root=root, progress=progress, isolate=isolate,
                   options=lambda s: {**exp.options_for(s), **plan.options(s)}, **packing)
