"""Grid execution: one experiment config → run specs → local or SLURM execution → one results matrix.

* :mod:`harness.grid.config` loads ``configs/experiments/*.yaml`` and expands it
  into :class:`~harness.specs.FinetuneSpec` / :class:`~harness.specs.BiasSpec`.
* :mod:`harness.grid.local` runs specs on this machine (one after another, or
  ``runs_per_gpu`` side by side per GPU) and holds :func:`~harness.grid.local.run_spec`,
  which runs one spec through the run store's lifecycle
  (:meth:`harness.store.RunStore.run`: skip when done, a lock against a concurrent
  duplicate, a running marker, one ok/failed record). SLURM array tasks call it too.
* :mod:`harness.grid.calibrate` measures ``runs_per_gpu: auto`` and ``precision: auto`` on the
  device a grid lands on (timed bursts of its first fine-tuning spec) and keeps the table in
  ``<output>/calibration/<device kind>.json``.
* :mod:`harness.grid.slurm` submits one job array through submitit.
* :mod:`harness.grid.entry` is what an array task runs (submitit or plain ``sbatch``).
* :mod:`harness.grid.status` says done / running / queued / failed / missing per spec.
* :mod:`harness.grid.collect` turns the run store into ``matrix.csv`` + ``criteria.yaml``.

Nothing here imports torch at import time; the run functions are imported
lazily when a spec actually runs.
"""
