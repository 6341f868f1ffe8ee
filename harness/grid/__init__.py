"""Grid execution: one experiment config → run specs → local or SLURM execution → one results matrix.

* :mod:`harness.grid.config` loads ``configs/experiments/*.yaml`` and expands it
  into :class:`~harness.specs.FinetuneSpec` / :class:`~harness.specs.BiasSpec`.
* :mod:`harness.grid.local` runs specs one after another (the default executor)
  and holds :func:`~harness.grid.local.run_spec`, the one place that runs a spec
  safely (skip when done, a lock against a concurrent duplicate, a running
  marker, a failed record on error). SLURM array tasks call it too.
* :mod:`harness.grid.slurm` submits one job array through submitit.
* :mod:`harness.grid.entry` is what an array task runs (submitit or plain ``sbatch``).
* :mod:`harness.grid.status` says done / running / queued / failed / missing per spec.
* :mod:`harness.grid.collect` turns the run store into ``matrix.csv`` + ``criteria.yaml``.

Nothing here imports torch at import time; the run functions are imported
lazily when a spec actually runs.
"""
