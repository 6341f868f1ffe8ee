"""The bias-scoring kind's section of an experiment config (:mod:`harness.grid.sections`): models × datasets.

::

    bias:
      models: [tiny:bert, tiny:gpt2] # default: the fine-tuning models
      datasets: [crows_pairs, stereoset, winobias]          # default: all
      options: {limit: 20}           # any BiasSpec field (scoring: the ranking preset's unless given)
      overrides: [{datasets: [stereoset], set: {limit: 10}}]
"""

from __future__ import annotations

from typing import Annotated

from pydantic import WithJsonSchema

from harness.bias.data import DATASETS
from harness.grid.schema import _known, listed
from harness.grid.sections import Axis, GridSection
from harness.specs import _bias_dataset
from ranking.floor.schema import Check, Text

# Grids name bias sets canonically (they become matrix column names): the registry's keys.
BIAS_DATASETS = tuple(DATASETS)
Dataset = Annotated[str, Text(), Check(_known(BIAS_DATASETS, "dataset", "known", _bias_dataset)),
                    WithJsonSchema({"type": "string", "enum": list(BIAS_DATASETS)})]

GRID = GridSection(
    title="Bias",
    doc="Bias-scoring runs: models × datasets.",
    runs="bias",
    models="models to score (default: the fine-tuning models)",
    models_from="finetune",
    axes=(Axis("datasets", "dataset", listed(Dataset), "bias benchmarks", default=list(BIAS_DATASETS)),),
    options="options",
    override_doc="Options for the bias runs whose model and dataset match the globs given.",
    preset_defaults=(("scoring", "bias_scoring"),),  # the preset's scoring unless the config gives one
)
