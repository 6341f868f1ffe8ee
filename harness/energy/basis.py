"""How a run's energy was obtained: read from the hardware (an energy counter or a power sensor), or modelled.

Each part of a run's energy (CPU, RAM, GPU) comes from one method, recorded in
``efficiency.methods``. A part is ``measured`` when that method reads the hardware —
NVML's total-energy counter for a GPU, or, where a GPU has no such counter, its NVML
power sensor sampled once a second (a measurement, only coarser in time); RAPL for the
CPU (codecarbon's ``intel_rapl`` mode, or ``windows_emi``, RAPL on Windows) — and
``modelled`` otherwise: codecarbon's CPU model (TDP × CPU load, or a constant share of
the TDP, with a default TDP for a processor it does not know) and its RAM model. A
method this module does not know counts as modelled: a figure is called measured only
when it is known to be.

The run's total is then ``measured`` (every part with energy was measured),
``estimate`` (every part with energy was modelled), ``mixed`` (some of each) or
``none`` (no part recorded any energy: codecarbon off or failed, and no NVML GPU).
``unknown`` is for what cannot be told: a record written before the basis was
recorded, or a resumed run whose earlier attempt's basis is not known.

On a CPU-only machine without readable RAPL counters the whole figure is an
estimate, and since the CPU and RAM models are nearly constant power, it is in
effect a measure of time.

>>> part_basis("NVML total-energy counter"), part_basis("codecarbon cpu_load (TDP 8 W)")
('measured', 'modelled')
>>> part_basis("codecarbon NVML power sampling"), part_basis("codecarbon RAM model")
('measured', 'modelled')
>>> total_basis({"cpu": "modelled", "ram": "modelled", "gpu": "none"})
'estimate'
>>> total_basis({"cpu": "modelled", "ram": "modelled", "gpu": "measured"})
'mixed'
>>> combine("measured", "estimate"), combine("estimate", "none"), combine("estimate", "unknown")
('mixed', 'estimate', 'unknown')
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

MEASURED, MODELLED = "measured", "modelled"  # a part
ESTIMATE, MIXED, NONE, UNKNOWN = "estimate", "mixed", "none", "unknown"  # a total (also: MEASURED)
#: the values ``efficiency["energy_basis"]`` takes
BASES = (MEASURED, ESTIMATE, MIXED, NONE, UNKNOWN)
PARTS = ("cpu", "ram", "gpu")

#: methods (as ``efficiency.methods`` writes them) that read a hardware energy counter
_COUNTERS = ("NVML total-energy counter", "codecarbon NVML power sampling", "codecarbon intel_rapl",
             "codecarbon windows_emi")


def part_basis(method: str | None) -> str:
    """``measured`` if ``method`` reads a hardware energy counter, else ``modelled``."""
    text = str(method or "")
    return MEASURED if any(text == c or text.startswith(c + " ") for c in _COUNTERS) else MODELLED


def parts_basis(methods: Mapping[str, str], breakdown: Mapping[str, float]) -> dict[str, str]:
    """Per part (cpu, ram, gpu): ``measured``, ``modelled``, or ``none`` where it recorded no energy.

    >>> parts_basis({"cpu": "codecarbon intel_rapl", "ram": "codecarbon RAM model", "gpu": "no GPU used"},
    ...             {"cpu_kwh": 0.5, "ram_kwh": 0.25, "gpu_kwh": 0.0})
    {'cpu': 'measured', 'ram': 'modelled', 'gpu': 'none'}
    """
    return {p: part_basis(methods.get(p)) if float(breakdown.get(f"{p}_kwh") or 0.0) > 0 else NONE for p in PARTS}


def total_basis(parts: Mapping[str, str]) -> str:
    """The basis of the total from its parts' (``none`` parts add nothing)."""
    found = {b for b in parts.values() if b != NONE}
    if UNKNOWN in found:
        return UNKNOWN
    if not found:
        return NONE
    if found == {MEASURED}:
        return MEASURED
    if found == {MODELLED}:
        return ESTIMATE
    return MIXED


def modelled_kwh(parts: Mapping[str, str], breakdown: Mapping[str, float]) -> float:
    """The energy (kWh) of the parts that were modelled."""
    return sum(float(breakdown.get(f"{p}_kwh") or 0.0) for p in PARTS if parts.get(p) == MODELLED)


def combine(a: str | None, b: str | None) -> str:
    """The basis of a sum of two figures (two attempts of a run, a part of each): the weaker one.

    Equal bases stay; ``none`` (nothing recorded) adds nothing; a basis not known
    (``None``, or ``unknown``) makes the sum unknown; any other pair (measured with
    modelled or estimate, or either with mixed) is ``mixed``.
    """
    if a == b and a is not None:
        return a
    if a is None or b is None or UNKNOWN in (a, b):
        return UNKNOWN
    if a == NONE:
        return b
    if b == NONE:
        return a
    return MIXED


def column_basis(bases: Iterable[str | None]) -> str:
    """The basis of a criterion over its runs: theirs where all agree, else ``unknown`` if any is, else ``mixed``.

    A run without a recorded basis (``None``: a record from before it was recorded) is ``unknown``.

    >>> column_basis(["estimate", "estimate"]), column_basis(["estimate", "measured"]), column_basis(["measured", None])
    ('estimate', 'mixed', 'unknown')
    """
    found = {b if b in BASES else UNKNOWN for b in bases}
    if len(found) == 1:
        return found.pop()
    if not found or UNKNOWN in found:
        return UNKNOWN
    return MIXED


#: what each basis means, for a criterion's ``source`` text
DESCRIPTION = {
    MEASURED: "measured: hardware energy counters (NVML's total-energy counter for the GPU, RAPL for the CPU)",
    ESTIMATE: ("estimate: codecarbon's CPU model (TDP × load, or a constant; a default TDP for an unknown "
               "processor) and RAM model, no hardware energy counter, effectively a time proxy"),
    MIXED: ("mixed: partly measured by hardware energy counters (NVML, RAPL), partly modelled by codecarbon "
            "(CPU TDP/constant and RAM models)"),
    NONE: "no energy recorded (codecarbon off or failed, and no NVML GPU): the figure is 0, not a measurement",
    UNKNOWN: ("energy basis unknown (a record written before vnr recorded efficiency.energy_basis, "
              "or resumed from such an attempt)"),
}
