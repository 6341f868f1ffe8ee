"""The fine-tuning run kind's record (:mod:`harness.kinds`): a spec per (model, GLUE task, seed)."""

from __future__ import annotations

from harness.kinds import Data, RunKind
from harness.specs import FinetuneRunOptions, FinetuneSpec

KIND = RunKind(
    name="finetune",
    spec=FinetuneSpec,
    options=FinetuneRunOptions,
    run="harness.finetune.train:run_finetune",
    target="task",
    collect="harness.finetune.collect:collect_finetune",
    summary="harness.finetune.cli:summary_line",
    grid="harness.finetune.grid:GRID",  # its section of the experiment config
    prefetch=Data("GLUE task", available="harness.finetune.prefetch:glue_available",
                  fetch="harness.finetune.prefetch:prefetch_glue"),
    seed="seed",
    fused=("harness.finetune.fused:fuse_groups", "harness.finetune.fused:run_fused_group"),  # fuse: K
    criteria_of="harness.finetune.tasks:criteria_names",  # a task's columns (decide first spends its seeds)
    calibrated=True,  # its runs are what the grid's calibration bursts train and pack
)
