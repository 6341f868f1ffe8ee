"""The bias-scoring run kind's record (:mod:`harness.kinds`): a spec per (model, bias set)."""

from __future__ import annotations

from harness.kinds import Data, RunKind
from harness.specs import BiasRunOptions, BiasSpec

KIND = RunKind(
    name="bias",
    spec=BiasSpec,
    options=BiasRunOptions,
    run="harness.bias.run:run_bias",
    target="dataset",
    collect="harness.bias.collect:collect_bias",
    summary="harness.bias.cli:summary_line",
    grid="harness.bias.grid:GRID",  # its section of the experiment config
    prefetch=Data("bias set", available="harness.bias.prefetch:bias_available",
                  fetch="harness.bias.prefetch:prefetch_bias"),
)
