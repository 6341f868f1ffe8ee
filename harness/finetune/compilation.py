"""Whether a fine-tuning run compiles its training step (``FinetuneSpec.compile``: ``auto``, ``on``, ``off``).

``on`` sets the Trainer's ``TrainingArguments(torch_compile=True)`` (backend inductor, default mode): accelerate
wraps the model the Trainer trains in ``torch.compile`` when it prepares it, so the forward and, through
AOTAutograd, the backward run as compiled graphs (fewer, fused kernels: fewer launches for a launch-bound GPU),
while the optimizer step stays eager. The Trainer keeps the plain module as ``trainer.model``, so checkpoints,
``save_pretrained``, resuming, LoRA (applied before) and the flattened forward (patched before) are unchanged;
calling ``torch.compile`` on the model ourselves would give each of those an ``_orig_mod.`` wrapper to undo.

Compiled kernels reorder float operations, so a compiled run is the eager run rounded differently (the
training losses of a tiny BERT, 6 fp32 steps on the CPU: within the tolerance stated in
tests/test_compile.py). Hence the run-id rule of ``padding`` and ``precision``: an explicit ``on`` or ``off``
is part of the run id; ``auto`` is not, so a stored run is done whatever it used (re-running a grid never
redoes it unasked) and its record's ``settings.compile`` names what it used (nothing stored is relabelled).

Measured on a CPU (``scripts/bench_finetune.py --compile --task sst2 --steps 40 --warmup 5``: one thread, a
small BERT (2 layers, hidden 128), batch 16, 3 interleaved rounds, 2 cores shared with other work, load 3.7-4.8):
compiled / eager median samples/s 1.18x bucketed (391 against 331) and 1.35x flattened (687 against 509), with
identical training losses, after a first-round compile of 6.9 s and 26.2 s (a warm inductor cache on disk); the
rounds scatter by up to 45 %, so on this machine that is a hint, not a decision. The case compile is for, a
launch-bound GPU, is measured by the calibration on the device itself.

``auto`` compiles only where the grid's calibration measured the compiled step faster on this device
(:mod:`harness.grid.calibrate`: on a GPU, at the chosen layout, runs per GPU and precision, the compile time
spent in an untimed warm-up and weighed against a run's length); without that measurement it is eager: on a
CPU always (the calibration does not measure it there: "not measured: CPU"), and for a single ``vnr finetune``.

>>> choose_compile("auto", "cuda", calibrated="on")
{'mode': 'compiled', 'requested': 'auto', 'chosen_by': 'calibration'}
>>> choose_compile("auto", "cpu", calibrated="on")
{'mode': 'eager', 'requested': 'auto', 'chosen_by': 'default', 'reason': 'not measured: CPU'}
>>> choose_compile("on", "cpu")
{'mode': 'compiled', 'requested': 'on', 'chosen_by': 'the spec'}
"""

from __future__ import annotations

from typing import Any

from ranking.floor.errors import UserError

COMPILE_OPTIONS = ("auto", "on", "off")
CPU_NOTE = "not measured: CPU"
NO_CALIBRATION = "no calibration measured compile on this device"


def check_compile(compile_: str) -> None:
    """The ``compile`` option's one validation point."""
    if compile_ not in COMPILE_OPTIONS:
        raise UserError(f"compile {compile_!r}: use one of {', '.join(COMPILE_OPTIONS)}")


def choose_compile(requested: str = "auto", device: str = "cpu", calibrated: str | None = None) -> dict[str, Any]:
    """Compiled or eager for a run on ``device`` (``cpu`` | ``cuda``) under the ``compile`` option: what the
    record's ``settings.compile`` says. ``calibrated``: what the grid's calibration measured faster on this
    device (``on`` | ``off``; None where it did not measure compile).

    >>> choose_compile("auto", "cuda")
    {'mode': 'eager', 'requested': 'auto', 'chosen_by': 'default', 'reason': 'no calibration measured compile on this device'}
    >>> choose_compile("auto", "cuda", calibrated="off")["mode"], choose_compile("off", "cuda", calibrated="on")["mode"]
    ('eager', 'eager')
    """
    check_compile(requested)
    if requested != "auto":
        return {"mode": "compiled" if requested == "on" else "eager", "requested": requested, "chosen_by": "the spec"}
    if device == "cuda" and calibrated in ("on", "off"):
        return {"mode": "compiled" if calibrated == "on" else "eager", "requested": requested,
                "chosen_by": "calibration"}
    return {"mode": "eager", "requested": requested, "chosen_by": "default",
            "reason": CPU_NOTE if device != "cuda" else NO_CALIBRATION}


def training_arguments(choice: dict[str, Any]) -> dict[str, Any]:
    """The ``TrainingArguments`` keywords for a :func:`choose_compile` result.

    >>> training_arguments({"mode": "compiled"}), training_arguments({"mode": "eager"})
    ({'torch_compile': True}, {})
    """
    return {"torch_compile": True} if choice["mode"] == "compiled" else {}
