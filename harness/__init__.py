"""Produce results: GLUE fine-tuning, bias scoring, efficiency tracking, the run store,
local and SLURM execution.

Importing this package is cheap: torch and transformers are imported inside the
functions that need them, so ``vnr rank`` works on a laptop without them.
"""
