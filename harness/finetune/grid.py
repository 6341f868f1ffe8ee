"""The fine-tuning kind's section of an experiment config (:mod:`harness.grid.sections`): models × tasks × seeds.

::

    finetune:
      models: [tiny:bert, tiny:gpt2]
      tasks: [rte, sst2]             # GLUE; mnli is trained once, scored on matched and mismatched
      seeds: [0, 1]                  # or {from: 0, to: 4}
      hyperparameters: {max_steps: 10}                      # any FinetuneSpec field
      overrides: [{models: ["gpt2*"], tasks: [cola], set: {learning_rate: 5.0e-5}}]
      run_options: {save_steps: 500} # FinetuneRunOptions (not in the run id)
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import WithJsonSchema

from harness.finetune.tasks import TASKS
from harness.grid.schema import Seeds, _known, listed
from harness.grid.sections import Axis, GridSection
from harness.specs import FinetuneSpec, _glue_task
from ranking.floor.errors import UserError
from ranking.floor.schema import Check, Text

# Grids name tasks canonically (they become matrix column names): the registry's keys.
GLUE_TASKS = tuple(TASKS)
Task = Annotated[str, Text(), Check(_known(GLUE_TASKS, "task", "GLUE tasks", _glue_task)),
                 WithJsonSchema({"type": "string", "enum": list(GLUE_TASKS)})]

GRID = GridSection(
    title="Finetune",
    doc="Fine-tuning runs: models × tasks × seeds.",
    runs="fine-tuning",
    models="models to fine-tune: ids or {name, model_args}",
    axes=(
        Axis("tasks", "task", listed(Task),
             "GLUE tasks (mnli is trained once, scored on matched and mismatched)"),
        Axis("seeds", "seed", Seeds, "seeds: a list [0, 1, 2], or {from: 0, to: 4}", default=[0], shown="seed {}"),
    ),
    options="hyperparameters",
    options_what="hyper-parameters",
    override_doc="Options for the runs whose model, task and seed match the globs given (all runs where none is).",
    run_options_doc="keyword options of run_finetune that do not change results (not in the run id)",
    check="harness.finetune.grid:check_run",
    check_options="harness.finetune.grid:check_run_options",
)


def check_run(spec: FinetuneSpec, where: str, source: Any, checked: set[tuple[Any, ...]]) -> None:
    """What a fine-tuning run checks before it starts, checked at load instead (so before a calibration burst
    or a SLURM array starts): the model's dimensions, and a ``padding: flatten`` its family cannot take."""
    _check_fits_model(spec, where, checked)
    _check_batching(spec, source("padding"))


def check_run_options(options: dict[str, Any], where: str) -> None:
    """A tracker in ``run_options.report_to`` whose package is not installed: refused at load (and so at
    ``--dry-run``), as each run would refuse it before it starts."""
    from harness.finetune.trackers import check_trackers_installed, parse_report_to

    where = f"{where}.run_options.report_to"
    check_trackers_installed(parse_report_to(options.get("report_to"), where=where), where=where)


def _check_fits_model(spec: FinetuneSpec, where: str, checked: set[tuple[Any, ...]]) -> None:
    """``max_length`` beyond the model's positions or a LoRA ``r`` above its hidden size: refused at load for the
    models whose config is on disk (tiny, local, or in the Hugging Face cache: never the hub), by the check
    each run makes before it starts (:func:`harness.finetune.fit_checks.check_fits_model`)."""
    key = ("fits", spec.model, spec.model_args, spec.max_length, dict(spec.peft or ()).get("r"))
    if key in checked:
        return
    checked.add(key)
    from harness.finetune.fit_checks import check_fits_dimensions
    from harness.models import dimensions_on_disk

    try:
        check_fits_dimensions(spec, spec.model, dimensions_on_disk(spec.model, spec.model_args))
    except UserError as exc:
        raise UserError(f"{where}: {exc}") from None


def _check_batching(spec: FinetuneSpec, where: str) -> None:
    """``padding: flatten`` where the model's family cannot be flattened: refused at load, by the check
    :func:`harness.finetune.run_finetune` makes before it starts (``vnr finetune --padding flatten``), not
    by every run of the grid once it has started."""
    if spec.padding != "flatten":
        return
    from harness.finetune.batching import choose_batching
    from harness.models import resolve_model

    try:
        choose_batching(resolve_model(spec.model, spec.model_args).family, spec.padding)
    except UserError as exc:
        raise UserError(f"{where} ({spec.model}): {exc}") from None
