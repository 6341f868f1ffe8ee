"""Energy accounting of a run: what it used (kWh, hours, GPU-hours) and what that emitted (kg CO2eq).

* :mod:`harness.energy.intensity` — grid carbon intensity per country/region from
  codecarbon's bundled energy-mix data (never an internet look-up);
* :mod:`harness.energy.nvml` — the GPU energy meter (NVML's total-energy counter);
* :mod:`harness.energy.ledger` — per-GPU ledger of which runs were active when, and the
  attribution of a shared GPU's measured energy to the runs that shared it;
* :mod:`harness.energy.tracker` — :class:`~harness.energy.tracker.EfficiencyTracker`, which
  combines them (plus codecarbon's CPU/RAM estimate) into a run's ``efficiency`` record;
* :mod:`harness.energy.basis` — whether that energy was measured (hardware counters) or
  modelled (an estimate), per part and in total.

Importing this package imports none of them (nor torch, codecarbon or pynvml).
"""
