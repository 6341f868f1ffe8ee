"""Calibration: how many runs side by side (``runs_per_gpu: auto``) and which precision (``precision: auto``)
the device a grid lands on trains fastest, measured on it with the grid's own first fine-tuning spec.

:func:`calibrate` runs short timed *bursts* of that spec: N = 1, 2, 4, 8, 16 runs side by side, each
its own process (as the executor runs them; on CPU each gets ``cores // N`` threads), at every
candidate precision (:func:`candidate_precisions`: fp32 (+TF32 where the GPU has it) and bf16 on a
GPU, fp16 where it has no bf16; fp32 on CPU). Each burst is the real training path
(:func:`harness.finetune.train._train`, the run's data, model, collator and optimizer) for
``warmup + windows × steps`` optimizer steps. After the warm-up the workers time :data:`WINDOWS` windows of
``steps`` steps each, all N starting every window together (they wait for each other at its start). A
window's *aggregate* throughput is all workers' samples in it over the time from its common start to the
last worker's end; the burst's is the median of its windows (one window on a shared machine can be hit by
a neighbour; the median of three is not moved by one such window).

Bounds:

* memory: N runs are tried only while N × the largest peak memory measured per run so far (each run
  also takes one untimed step on a full ``batch_size × max_length`` batch in its warm-up:
  :func:`memory_probe`, so the bound holds for the grid's tasks with longer texts) is at most
  :data:`MEMORY_FRACTION` of the device's memory (GPU: its total; CPU: the RAM available at the start);
* time: the budget, ``min(cap, BUDGET_FRACTION × the grid's projected time at one run per device)`` (cap
  :data:`BUDGET_CAP_S`, per device type, configurable; the cap alone until the first rate is known), is a hard
  cap: a burst is not started when its estimate would pass it, and a burst still running at it is cut (its
  workers killed): its finished windows' rate, else the rate of the steps timed before the cut, is kept with
  a note (:func:`partial_rates`), else it is discarded; nothing is started after a cut. Where nothing was
  measured, N = 1 at the first candidate precision is used, said so, and not stored. On a CPU each worker
  gets one torch thread (``Limits.cpu_threads_per_run``);
* gain: N stops growing at a precision once the aggregate throughput gains less than
  :data:`GAIN_STOP` over the previous N.

The winner is the highest aggregate samples/s among the bursts whose loss trajectory matches fp32's
(:func:`loss_matches`: every logged training loss of the burst's first run, each the mean over
``log_every`` steps, within :data:`LOSS_RTOL` relative of fp32's at the same step; the first run of
every burst trains the spec's own seed on the same examples, so the trajectories are comparable).

With ``compile: auto`` on a GPU, one more burst trains the chosen setting (layout, N, precision) with its
training step compiled (:func:`measure_compile`: the compile time falls in the untimed warm-up and is weighed
against a run's length instead; skipped for budget where the budget cannot hold it); ``auto`` compiles only where
that measured faster. On a CPU compile is not measured (the table says "not measured: CPU"): ``auto`` is eager.

The table goes to ``<output>/calibration/<device kind>.json`` (written atomically), one entry per
spec *shape* (model, max_length, batch_size, requested precision: :func:`shape_key`), so a grid whose
first spec has another shape calibrates again, beside the earlier entry. :func:`ensure_calibration`
reuses an entry (no burst runs) and holds ``<device kind>.lock`` while it calibrates, so concurrent
SLURM array tasks on one device kind calibrate once. Every fine-tuning run then gets
:func:`calibration_ref` as its ``calibration`` option, which resolves its ``precision: auto`` and is
stored in its record.

>>> choose([{"n": 1, "precision": "fp32", "status": "measured", "samples_s": 10.0, "loss_match": True},
...         {"n": 2, "precision": "fp32", "status": "measured", "samples_s": 18.0, "loss_match": True},
...         {"n": 2, "precision": "bf16", "status": "measured", "samples_s": 25.0, "loss_match": False}])
{'runs_per_gpu': 2, 'precision': 'fp32', 'samples_s': 18.0}
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from harness.grid.local import check_gpus, cpu_cores, cpu_threads, visible_gpus
from harness.kinds import calibrated, kind_of
from harness.specs import FinetuneSpec
from ranking.floor.errors import UserError
from ranking.floor.json_io import JsonProblem, read_json_object

log = logging.getLogger("harness.grid")

CANDIDATE_N = (1, 2, 4, 8, 16)
FUSE_CANDIDATES = (2, 4, 8, 16)  # fused group sizes K a calibration measures for fuse: auto (harness.finetune.fused)
MEMORY_FRACTION = 0.90  # N × peak memory per run must stay within this share of the device's memory
GAIN_STOP = 0.05  # stop growing N at a precision when the aggregate throughput gains less than this
LOSS_RTOL = 0.05  # a precision's logged training losses within 5 % (relative) of fp32's at the same steps
BUDGET_FRACTION = 0.05  # of the grid's projected time at one run per device
BUDGET_CAP_S = {"cuda": 600.0, "cpu": 120.0}  # hard caps on the bursts' wall time
STEPS = {"cuda": (10, 50), "cpu": (5, 40)}  # (warm-up, timed per window) optimizer steps of each worker
WINDOWS = 3  # timed windows per burst; the burst's throughput is their median
AUTO = "auto"
CUDA_CONTEXT_BYTES = 512 * 2**20  # what a CUDA context holds beyond torch's allocator (added to its peak)
WORKER_START_TIMEOUT_S = 900.0
#: What a compiled burst is expected to spend compiling (in its untimed warm-up) beyond an eager burst's wall time,
#: before one was measured: a bert-base forward and backward through inductor takes about a minute on a GPU host.
#: The budget check adds it; a burst that still overruns is cut at the budget as any other.
COMPILE_ESTIMATE_S = 90.0

#: Training examples per GLUE task (the public GLUE train splits; 949,733 in all).
GLUE_TRAIN_SIZES: dict[str, int] = {
    "cola": 8551, "sst2": 67349, "mrpc": 3668, "stsb": 5749, "qqp": 363846,
    "mnli": 392702, "qnli": 104743, "rte": 2490, "wnli": 635,
}


# ---------------------------------------------------------------------- the device
@dataclass(frozen=True)
class Device:
    """What a calibration runs on: its kind (the file name), type, memory and cores."""

    kind: str  # GPU name slug (nvidia-h100-80gb-hbm3) or cpu-<model>-<cores>
    type: str  # cuda | cpu
    name: str
    memory_bytes: int  # GPU: total memory; CPU: RAM available now
    cores: int
    bf16: bool = False


def slug(text: str) -> str:
    """``NVIDIA H100 80GB HBM3`` → ``nvidia-h100-80gb-hbm3``.

    >>> slug("NVIDIA H100 80GB HBM3"), slug("AMD EPYC 7B13 64-Core Processor")
    ('nvidia-h100-80gb-hbm3', 'amd-epyc-7b13-64-core-processor')
    """
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    import platform

    return platform.processor() or platform.machine() or "cpu"


def _nvml_gpu(cuda_device: str | None) -> tuple[str, int, bool] | None:
    """(name, total memory, bf16 support) of the GPU the workers will see, from NVML (no CUDA context in
    this process, which goes on to run the grid); None where NVML cannot say."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # no NVML library or driver
        return None
    from harness.energy.nvml import handle_for_entry, visible_entry

    try:
        handle = handle_for_entry(pynvml, visible_entry(cuda_device))
        name = pynvml.nvmlDeviceGetName(handle)
        name = name.decode() if isinstance(name, bytes) else str(name)
        memory = int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
        major, _ = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
        return name, memory, major >= 8  # bf16 from Ampere on
    except Exception:  # a MIG or UUID entry NVML cannot resolve this way, NotSupported, ...
        return None
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def detect_device(cuda_device: str | None = None) -> Device:
    """The GPU the runs will see (``cuda_device``, else the first of ``CUDA_VISIBLE_DEVICES``), else the CPU."""
    import torch

    cores = cpu_cores()
    visible = cuda_device if cuda_device is not None else os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None or visible.strip() not in ("", "-1"):
        gpu = _nvml_gpu(cuda_device)
        if gpu is not None:
            name, memory, bf16 = gpu
            return Device(kind=slug(name), type="cuda", name=name, memory_bytes=memory, cores=cores, bf16=bf16)
        if torch.cuda.is_available():
            props = torch.cuda.get_device_properties(0)
            return Device(kind=slug(props.name), type="cuda", name=props.name, memory_bytes=int(props.total_memory),
                          cores=cores, bf16=bool(torch.cuda.is_bf16_supported()))
    import psutil

    model = _cpu_model()
    return Device(kind=f"cpu-{slug(model)}-{cores}", type="cpu", name=model,
                  memory_bytes=int(psutil.virtual_memory().available), cores=cores)


def candidate_precisions(device: Device) -> tuple[str, ...]:
    """fp32 first (the loss reference), then bf16 on a GPU that has it, else fp16; CPU: fp32 only.

    >>> candidate_precisions(Device("x", "cuda", "x", 1, 1, bf16=False)), candidate_precisions(Device("c", "cpu", "c", 1, 1))
    (('fp32', 'fp16'), ('fp32',))
    """
    if device.type != "cuda":
        return ("fp32",)
    return ("fp32", "bf16" if device.bf16 else "fp16")


# ---------------------------------------------------------------------- the grid's size and shape
def shape_key(spec: FinetuneSpec) -> str:
    """What a calibration entry is for: the spec's model, max_length, batch_size and requested precision, and
    where set, its model_args, an explicit batch layout, an explicit ``compile`` and LoRA adapters (each changes
    the throughput and
    memory a run has; a default spec's key is as before they were named).

    >>> shape_key(FinetuneSpec("tiny:bert", "rte", 0, batch_size=8))
    'model=tiny:bert,max_length=128,batch_size=8,precision=auto'
    >>> shape_key(FinetuneSpec("tiny:gpt2", "rte", 0, padding="flatten", peft="lora"))
    'model=tiny:gpt2,max_length=128,batch_size=16,precision=auto,padding=flatten,peft={"alpha": 16.0, "dropout": 0.1, "method": "lora", "r": 8}'
    """
    key = f"model={spec.model},max_length={spec.max_length},batch_size={spec.batch_size},precision={spec.precision}"
    if spec.model_args:
        key += ",model_args=" + json.dumps(dict(spec.model_args), sort_keys=True, default=str)
    if spec.padding != "auto":
        key += f",padding={spec.padding}"
    if spec.compile != "auto":
        key += f",compile={spec.compile}"
    if spec.peft:
        key += ",peft=" + json.dumps(dict(spec.peft), sort_keys=True, default=str)
    return key


def training_samples(spec: FinetuneSpec, train_sizes: Mapping[str, int] = GLUE_TRAIN_SIZES) -> int:
    """Training samples the spec processes: ``max_steps × batch_size``, else its train set × epochs.

    >>> training_samples(FinetuneSpec("tiny:bert", "rte", 0)), training_samples(FinetuneSpec("tiny:bert", "rte", 0, max_steps=10, batch_size=4))
    (12450, 40)
    """
    if spec.max_steps:
        return int(spec.max_steps) * int(spec.batch_size)
    size = train_sizes.get(spec.task, 0)
    if spec.max_train_samples:
        size = min(size, int(spec.max_train_samples))
    return int(math.ceil(size * float(spec.epochs)))


def grid_samples(specs: Sequence[Any]) -> int:
    """Training samples of every fine-tuning spec in a grid (what the time budget is a share of)."""
    return sum(training_samples(s) for s in calibrated(specs))


# ---------------------------------------------------------------------- one burst: the worker
@dataclass(frozen=True)
class BurstPlan:
    """What one worker of a burst trains."""

    spec: Mapping[str, Any]  # FinetuneSpec fields
    precision: str
    index: int  # the worker's place in the burst: seed = spec seed + index
    warmup: int
    steps: int
    log_every: int
    barrier: str
    out: str
    data_root: str | None = None
    threads: int | None = None  # CPU: torch threads
    windows: int = 1  # timed windows of ``steps`` steps after the warm-up


def burst_spec(plan: BurstPlan) -> FinetuneSpec:
    """The spec a burst worker trains: the grid's spec at the candidate precision, its seed shifted by the
    worker's index, cut to ``warmup + windows × steps`` steps (one pass over exactly that many examples)."""
    spec = FinetuneSpec.from_mapping(dict(plan.spec), where="calibration")
    total = plan.warmup + plan.windows * plan.steps
    return replace(spec, seed=spec.seed + plan.index, precision=plan.precision, max_steps=total,
                   max_train_samples=total * spec.batch_size, max_eval_samples=spec.batch_size)


def memory_probe(model: Any, spec: FinetuneSpec) -> None:
    """One forward and backward pass of a full ``batch_size × max_length`` batch (random token ids, every
    position real), then the gradients are dropped: the peak memory a run of this shape can reach, whatever
    the lengths of the burst's own examples (a grid's first task may have short texts, the next long ones;
    N is bounded by this peak, so a longer task does not run out of memory at the calibrated N). Untimed:
    it runs in the warm-up. With ``padding: flatten`` it is the flattened batch of that shape
    (:mod:`harness.finetune.flat`: ``batch_size`` rows of one ``max_length`` example each), through the
    flattened forward."""
    import torch

    device = next(model.parameters()).device
    vocab = int(getattr(model.config, "vocab_size", 0) or 2)
    rows, width = int(spec.batch_size), int(spec.max_length)
    ids = torch.randint(0, vocab, (rows, width), device=device)
    if spec.padding == "flatten":  # the flattening families only: run_finetune refuses flatten for the others
        inputs = {"input_ids": ids, "position_ids": torch.arange(width, device=device).expand(rows, -1),
                  "example_ends": torch.arange(1, rows + 1, device=device) * width - 1,
                  "example_lengths": torch.full((rows,), width, device=device)}
    else:
        inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    half = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(spec.precision)
    with (torch.autocast(device.type, dtype=half) if half is not None and device.type == "cuda"
          else contextlib.nullcontext()):
        out = model(**inputs)
    out.logits.float().sum().backward()
    model.zero_grad(set_to_none=True)
    if device.type == "cuda":
        torch.cuda.synchronize()


def worker_result(path: Path, windows: int, precision: str = "?", n: int = 0) -> dict[str, Any]:
    """What a burst worker that exited well wrote to ``path``; a one-line ``RuntimeError`` (as for a worker that
    failed) where the file is missing, cut short, not JSON or not the shape :func:`run_worker` writes."""
    try:
        doc = read_json_object(path, max_bytes=1 << 20)
    except (OSError, JsonProblem) as exc:
        why = f"is {exc.strerror or type(exc).__name__}" if isinstance(exc, OSError) else str(exc)
        why = why if why.startswith(("holds", "is ")) else f"is {why}"
        raise RuntimeError(f"a calibration worker ({precision}, N={n}) left no usable result: {path} {why}") from None
    times = doc.get("t1")
    fine = (type(doc.get("index")) is int and type(doc.get("window_samples")) is int and doc["window_samples"] >= 0
            and type(doc.get("peak_memory_bytes")) is int and "losses" in doc and isinstance(times, list) and len(times) >= windows
            and all(type(t) in (int, float) and math.isfinite(t) for t in times[:windows]))
    if not fine:
        raise RuntimeError(f"a calibration worker ({precision}, N={n}) left no usable result: {path} lacks its "
                           "index, window_samples, peak_memory_bytes, losses or one finite t1 per window")
    return doc


def run_worker(plan: BurstPlan) -> dict[str, Any]:
    """One burst worker: train through :func:`harness.finetune.train._train` with a timer; what it measured."""
    import resource

    import torch
    from transformers import TrainerCallback

    from harness.finetune.tasks import get_task
    from harness.finetune.train import _train

    if plan.threads:
        torch.set_num_threads(plan.threads)
    spec = burst_spec(plan)
    cuda = torch.cuda.is_available()
    barrier = Path(plan.barrier)
    marks: dict[str, Any] = {"losses": [], "t0": [], "t1": []}
    end = plan.warmup + plan.windows * plan.steps

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    class BurstTimer(TrainerCallback):
        """At the start of every window (after the warm-up, then every ``steps`` steps) waits for the other
        workers and the parent's ``go-<window>``; times each window; logs the loss every ``log_every``
        steps; keeps the burst from evaluating or saving."""

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            step = state.global_step
            if marks["t0"]:  # a timed step: its end, for the partial rate of a burst cut at the budget
                with open(barrier / f"steps-{plan.index}", "a") as f:  # (no sync: approximate on a GPU)
                    f.write(f"{time.time()!r}\n")
            if step >= plan.warmup and (step - plan.warmup) % plan.steps == 0:
                window = (step - plan.warmup) // plan.steps  # the window that starts now (the one before ends)
                sync()
                if window > 0:
                    marks["t1"].append(time.time())
                if window == 0:
                    memory_probe(kw["model"], spec)
                if window < plan.windows:
                    (barrier / f"ready-{plan.index}-{window}").write_text("")
                    waited = time.time()
                    while not (barrier / f"go-{window}").exists():
                        if (barrier / "abort").exists() or time.time() - waited > WORKER_START_TIMEOUT_S:
                            raise RuntimeError("the calibration burst was aborted")
                        time.sleep(0.002)
                    marks["t0"].append(time.time())
            if step > plan.warmup and (step - plan.warmup) % plan.log_every == 0:
                control.should_log = True

        def on_log(self, args: Any, state: Any, control: Any, logs: Any = None, **kw: Any) -> None:
            if logs and "loss" in logs and state.global_step > plan.warmup:
                marks["losses"].append([int(state.global_step), float(logs["loss"])])

        def on_epoch_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            control.should_evaluate = False
            control.should_save = False

    from ranking.floor.paths import resolve_data_root

    with tempfile.TemporaryDirectory(prefix="vnr-calibration-") as tmp:
        result = _train(spec, get_task(spec.task), Path(tmp) / "run", None,
                        data_root=resolve_data_root(plan.data_root), progress=False, save_steps=None,
                        optim=None, eval_batch_size=None, dataloader_num_workers=0, tracker_kwargs=None,
                        extra_callbacks=[BurstTimer()])
    if len(marks["t1"]) < plan.windows:
        raise RuntimeError(f"the burst trained {result['train']['global_step']} steps, fewer than {end}")
    if cuda:
        peak = int(torch.cuda.max_memory_reserved()) + CUDA_CONTEXT_BYTES
    else:
        peak = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # Linux: KiB
    return {"index": plan.index, "t0": marks["t0"], "t1": marks["t1"], "window_samples": plan.steps * spec.batch_size,
            "losses": marks["losses"], "peak_memory_bytes": peak, "precision": result["settings"]["precision"],
            "tf32": result["settings"]["tf32"], "model_parameters": result["train"]["model_parameters"]}


# ---------------------------------------------------------------------- one burst: the parent
class DeviceSampler:
    """NVML's utilisation (polled) and energy counter (power = energy / time) of the GPU the bursts run on
    (``cuda_device``, else the first of ``CUDA_VISIBLE_DEVICES``: :func:`harness.energy.nvml.visible_entry`),
    while a burst is timed. It opens the GPU through NVML only: no CUDA context in the grid's driver. Nothing
    on CPU, or where NVML cannot say (``available`` False: utilisation and power are null)."""

    def __init__(self, device: Device, period_s: float = 0.2, cuda_device: str | None = None):
        self.available = False
        self.period_s = period_s
        self._nvml: Any = None
        self._handle: Any = None
        if device.type == "cuda":
            with contextlib.suppress(Exception):  # no NVML, or an entry it cannot resolve (a MIG slice)
                import pynvml

                from harness.energy.nvml import handle_for_entry, visible_entry

                pynvml.nvmlInit()
                self._nvml = pynvml
                self._handle = handle_for_entry(pynvml, visible_entry(cuda_device))
                self.available = True
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._mj0: int | None = None
        self._t0 = 0.0

    def _energy_mj(self) -> int | None:
        try:
            return int(self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle))
        except Exception:  # no energy counter before Volta: power stays null
            return None

    def start(self) -> None:
        if not self.available:
            return
        self._samples, self._t0 = [], time.time()
        self._mj0 = self._energy_mj()
        self._stop.clear()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self._samples.append(float(self._nvml.nvmlDeviceGetUtilizationRates(self._handle).gpu))
            except Exception:  # NotSupported on this GPU: utilisation stays null
                return

    def stop(self) -> tuple[float | None, float | None]:
        """(mean utilisation %, mean power W) over the window since :meth:`start`."""
        if not self.available or self._thread is None:
            return None, None
        self._stop.set()
        self._thread.join()
        seconds = time.time() - self._t0
        mj = self._energy_mj()
        watts = (mj - self._mj0) / 1000.0 / seconds if mj is not None and self._mj0 is not None and seconds > 0 else None
        util = sum(self._samples) / len(self._samples) if self._samples else None
        return util, watts

    def close(self) -> None:
        if self._nvml is not None:
            with contextlib.suppress(Exception):
                self._nvml.nvmlShutdown()
            self._nvml = None


def worker_error(text: str, returncode: int | None = None, limit: int = 300) -> str:
    """One line for a burst worker that failed, from its stderr: the exception its traceback ends with (type and
    message, whitespace made single spaces, cut to ``limit``), else its last line, else its exit status.

    >>> worker_error('Traceback (most recent call last):\\n  File "x.py", line 1\\n    f()\\n'
    ...              'RuntimeError: CUDA out of memory.\\n  Tried to allocate 4 GiB\\n', 1)
    'RuntimeError: CUDA out of memory. Tried to allocate 4 GiB'
    >>> worker_error("", -9)
    'exited with status -9 and no output'
    """
    lines = text.splitlines()
    start = max((i for i, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")),
                default=None)
    if start is not None:  # the frames are indented; the exception is the first line after them that is not
        tail = next((lines[i:] for i in range(start + 1, len(lines)) if lines[i] and not lines[i][0].isspace()), [])
    else:
        tail = [line for line in lines if line.strip()][-1:]
    found = " ".join(" ".join(tail).split())
    if not found:
        return f"exited with status {returncode} and no output"
    return found if len(found) <= limit else found[: limit - 1] + "…"


def run_burst(spec: FinetuneSpec, n: int, precision: str, *, device: Device, warmup: int, steps: int,
              data_root: Path | None, work: Path, sampler: DeviceSampler | None = None,
              cuda_device: str | None = None, windows: int = WINDOWS, log_dir: Path | None = None,
              deadline: float | None = None, threads: int | None = None) -> dict[str, Any]:
    """N workers of ``spec`` at ``precision`` side by side; one row of the calibration table.

    ``deadline`` (a ``time.time()``): the burst is cut there, its workers killed; the row then holds the rate of
    what was timed before the cut (:func:`partial_rates`, ``cut`` says so) or, when nothing was, status ``cut``.
    ``threads``: torch threads per worker on a CPU (default: the cores shared out).

    ``cuda_device``: the GPU the workers see (``CUDA_VISIBLE_DEVICES``; default: as this process).
    The row's ``samples_s`` is the median of its ``window_samples_s`` (one aggregate throughput per window).
    A worker that fails raises a ``RuntimeError`` of one line (:func:`worker_error`); its whole output is kept in
    ``log_dir`` (the grid's ``logs/calibration/``) where one is given.
    """
    started = time.time()
    tag = f"{precision}-n{n}-{int(started * 1000)}"
    barrier = work / tag
    barrier.mkdir(parents=True)
    if device.type != "cpu":
        threads = None
    elif threads is None:
        threads = cpu_threads(n)
    env = {**os.environ}
    if cuda_device is not None:
        env["CUDA_VISIBLE_DEVICES"] = cuda_device
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    log_every = max(1, (windows * steps) // 6)
    procs, outs = [], []
    for i in range(n):
        out = barrier / f"worker-{i}.json"
        plan = BurstPlan(spec=asdict(spec), precision=precision, index=i, warmup=warmup, steps=steps,
                         log_every=log_every, barrier=str(barrier), out=str(out),
                         data_root=str(data_root) if data_root else None, threads=threads, windows=windows)
        cmd = [sys.executable, "-m", "harness.grid.calibrate", "--worker", json.dumps(asdict(plan), default=list)]
        with open(barrier / f"worker-{i}.err", "w") as err:  # a file, not a pipe: a chatty worker never blocks
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err))
        outs.append(out)

    def error_of(i: int) -> str:
        err = barrier / f"worker-{i}.err"
        line = worker_error(err.read_text(errors="replace"), procs[i].poll())
        if log_dir is not None:
            with contextlib.suppress(OSError):
                log_dir.mkdir(parents=True, exist_ok=True)
                kept = shutil.copyfile(err, log_dir / f"{tag}-worker-{i}.err")
                line += f" (its output: {kept})"
        return line

    go: list[float] = []
    cut: float | None = None

    def past_deadline() -> bool:
        nonlocal cut
        if deadline is not None and time.time() > deadline:
            cut = time.time()
        return cut is not None

    try:
        for window in range(windows):  # every worker at the window's start (the first: loaded and warmed up)
            since = time.time()
            while len(list(barrier.glob(f"ready-*-{window}"))) < n:
                if past_deadline():
                    break
                exited = [i for i, p in enumerate(procs) if p.poll() is not None]
                if exited:
                    raise RuntimeError(f"a calibration worker ({precision}, N={n}) exited: {error_of(exited[0])}")
                if time.time() - since > WORKER_START_TIMEOUT_S:
                    raise RuntimeError(f"calibration workers ({precision}, N={n}) did not reach window {window} "
                                       "in time")
                time.sleep(0.002)
            if cut is not None:
                break
            if window == 0 and sampler is not None:
                sampler.start()
            go.append(time.time())
            (barrier / f"go-{window}").write_text("")
        while cut is None and any(p.poll() is None for p in procs) and not past_deadline():
            time.sleep(0.01)
        util, watts = sampler.stop() if sampler is not None else (None, None)
        if cut is not None:
            return _cut_row(n, precision, barrier, go, cut, started, spec.batch_size, threads, util, watts)
        failed = [i for i, p in enumerate(procs) if p.returncode != 0]
        if failed:
            raise RuntimeError(f"a calibration worker ({precision}, N={n}) failed: {error_of(failed[0])}")
    finally:
        (barrier / "abort").write_text("")
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    workers = sorted((worker_result(o, windows, precision, n) for o in outs), key=lambda w: w["index"])
    samples = sum(int(w["window_samples"]) for w in workers)  # per window, all workers
    durations = [max(float(w["t1"][k]) for w in workers) - go[k] for k in range(windows)]
    rates = [samples / d if d > 0 else None for d in durations]
    return {
        "n": n, "precision": precision, "status": "measured",
        "samples_s": statistics.median(rates) if all(rates) else None,
        "window_samples_s": rates,
        "seconds": sum(durations), "timed_samples": samples * windows,
        "utilisation_pct": util, "power_w": watts,
        "peak_memory_bytes": max(int(w["peak_memory_bytes"]) for w in workers),
        "threads_per_run": threads, "tf32": bool(workers[0].get("tf32")),
        "model_parameters": workers[0].get("model_parameters"),
        "losses": workers[0]["losses"],
        "wall_s": time.time() - started,
    }


def partial_rates(go: Sequence[float], step_ends: Sequence[Sequence[float]], window_samples: int, batch_size: int,
                  cut: float) -> tuple[list[float], float | None]:
    """The rates a burst cut at ``cut`` still gives: each timed window all workers finished (its next window's
    ``go`` exists): ``window_samples`` (all workers) over the time from its ``go`` to the last worker's last step
    in it; and the window the cut fell in: the samples of the steps finished in it by then over the time since
    its ``go`` (None when none was).

    >>> partial_rates([0.0, 10.0, 18.0], [[4.0, 8.0, 12.0, 14.0, 19.0], [5.0, 7.0, 11.0, 13.0, 20.0]], 8, 2, cut=22.0)
    ([1.0, 2.0], 1.0)
    """
    windows = []
    for k in range(len(go) - 1):
        last = max((t for ends in step_ends for t in ends if go[k] <= t < go[k + 1]), default=None)
        if last is not None and last > go[k]:
            windows.append(window_samples / (last - go[k]))
    if not go:
        return windows, None
    done = sum(1 for ends in step_ends for t in ends if go[-1] <= t <= cut)
    return windows, (done * batch_size / (cut - go[-1]) if done and cut > go[-1] else None)


def _cut_row(n: int, precision: str, barrier: Path, go: list[float], cut: float, started: float, batch_size: int,
             threads: int | None, util: float | None, watts: float | None) -> dict[str, Any]:
    """The row of a burst cut at the budget (:func:`run_burst`): its finished windows' median rate, else the
    partial rate of the window the cut fell in, else nothing (status ``cut``, discarded)."""
    step_ends = []
    for path in sorted(barrier.glob("steps-*")):
        with contextlib.suppress(OSError, ValueError):
            step_ends.append([float(line) for line in path.read_text().split()])
    steps_per_window = None
    if len(go) >= 2:  # the steps of a full window: per worker, those between two go's
        steps_per_window = max((sum(1 for t in ends if go[0] <= t < go[1]) for ends in step_ends), default=0)
    window_samples = n * (steps_per_window or 0) * batch_size
    windows, partial = partial_rates(go, step_ends, window_samples, batch_size, cut)
    base = {"n": n, "precision": precision, "threads_per_run": threads, "wall_s": time.time() - started,
            "utilisation_pct": util, "power_w": watts, "peak_memory_bytes": None, "losses": [], "cut": True}
    if windows:
        rate, how = statistics.median(windows), f"the median of the {len(windows)} timed window(s) finished"
    elif partial is not None:
        rate, how = partial, "the steps timed in its first window before the cut"
    else:
        return {**base, "status": "cut", "samples_s": None,
                "reason": f"budget: cut after {cut - started:.0f} s, before a timed step ended: discarded"}
    return {**base, "status": "measured", "samples_s": rate, "window_samples_s": windows or [partial],
            "note": f"cut at the budget after {cut - started:.0f} s: rate from {how} (partial)"}


# ---------------------------------------------------------------------- the sweep
def loss_matches(losses: Sequence[Sequence[float]], reference: Sequence[Sequence[float]],
                 rtol: float = LOSS_RTOL) -> bool:
    """Every logged loss within ``rtol`` (relative) of the reference's at the same step, all finite,
    and at least one step in common.

    >>> loss_matches([[2, 0.70], [4, 0.66]], [[2, 0.69], [4, 0.68]]), loss_matches([[2, 0.9]], [[2, 0.69]])
    (True, False)
    """
    ref = {int(s): float(v) for s, v in reference}
    common = [(float(v), ref[int(s)]) for s, v in losses if int(s) in ref]
    if not common:
        return False
    return all(math.isfinite(a) and math.isfinite(b) and abs(a - b) <= rtol * abs(b) for a, b in common)


def measure_capture(spec: FinetuneSpec, device: Device, eager: Mapping[str, Any], burst: Any, *,
                    time_left: float, spent: bool = False) -> dict[str, Any]:
    """``capture: auto``: one fused burst of the chosen K with the whole step captured
    (:meth:`harness.finetune.fused.StackedRuns.captured_step`), against that K's eager fused burst ``eager``.
    The capture's cost (the captured burst's untimed seconds beyond the eager burst's: compiling the step and
    recording a graph per batch shape) is weighed against a whole group: captured only where K runs of ``spec``
    (:func:`training_samples` each) at the captured rate plus that cost end sooner than at the eager rate, and
    the losses match (:func:`loss_matches`). ``burst()`` → the captured burst's row.

    >>> gpu, spec = Device("gpu-x", "cuda", "x", 1, 1), FinetuneSpec("tiny:bert", "rte", 0)
    >>> eager = {"fuse": 4, "status": "measured", "samples_s": 400.0, "seconds": 10.0, "wall_s": 20.0,
    ...          "losses": [[20, 0.70]]}
    >>> out = measure_capture(spec, gpu, eager, lambda: {**eager, "samples_s": 1000.0, "wall_s": 60.0}, time_left=600)
    >>> out["chosen"], out["capture_s"], out["note"]
    ('on', 40.0, 'captured 1000.0 against eager 400.0 samples/s at fused K=4; capture 40 s per group: a group of 4 × 12450 samples takes 90 s against 124 s')
    >>> slow = measure_capture(spec, gpu, eager, lambda: {**eager, "samples_s": 410.0, "wall_s": 60.0}, time_left=600)
    >>> slow["chosen"]   # 1.5 % faster does not pay for 40 s of capture
    'off'
    >>> measure_capture(spec, Device("cpu-x", "cpu", "x", 1, 1), eager, None, time_left=600)["note"]
    'not measured: CPU (no kernel launches to save)'
    """
    k = int(eager["fuse"])
    if device.type != "cuda":
        return {"status": "not measured", "note": "not measured: CPU (no kernel launches to save)", "rows": []}
    estimate = float(eager.get("wall_s") or 0.0) + COMPILE_ESTIMATE_S
    if spent or estimate > time_left:
        why = ("the budget was spent (a burst was cut at it)" if spent else
               f"{time_left:.0f} s left, a captured burst takes about {estimate:.0f} s")
        return {"status": "skipped", "note": f"skipped for budget: {why}",
                "rows": [{"n": 1, "fuse": k, "capture": "on", "precision": "fp32", "status": "skipped",
                          "reason": f"budget: {why}"}]}
    row = {**burst(), "fuse": k, "capture": "on"}
    out: dict[str, Any] = {"status": "measured", "rows": [row], "eager_samples_s": eager["samples_s"]}
    if row.get("status") != "measured" or not row.get("samples_s"):
        return {**out, "chosen": "off",
                "note": f"captured burst {row.get('status')}: {row.get('reason', 'no rate')}; eager kept"}
    eager_rate, samples = float(eager["samples_s"]), training_samples(spec)
    w = weigh_one_time_cost(row, eager, eager_rate, runs=k, samples=samples)  # the K runs of one group
    note = (f"captured {w['rate']:.1f} against eager {eager_rate:.1f} samples/s at fused K={k}; capture "
            f"{w['cost_s']:.0f} s per group: a group of {k} × {samples} samples takes {w['t_new']:.0f} s against "
            f"{w['t_eager']:.0f} s" + ("" if w["matches"] else "; its losses do not match the eager ones"))
    return {**out, "chosen": w["chosen"], "capture_s": w["cost_s"], "captured_samples_s": w["rate"], "note": note}


def measured_rates(rows: Sequence[Mapping[str, Any]]) -> dict[tuple[int, str], float]:
    """(N, precision) → the median aggregate samples/s over every timed window of its measured bursts whose
    loss matches fp32's (a row without windows counts its ``samples_s`` once; a setting measured again in
    the confirmation round has the windows of both bursts).

    >>> measured_rates([{"n": 2, "precision": "fp32", "status": "measured", "loss_match": True, "samples_s": 9.0,
    ...                  "window_samples_s": [9.0, 3.0, 10.0]},
    ...                 {"n": 2, "precision": "fp32", "status": "measured", "loss_match": True, "samples_s": 11.0,
    ...                  "window_samples_s": [11.0, 12.0, 8.0]}])
    {(2, 'fp32'): 9.5}
    """
    rates: dict[tuple[int, str], list[float]] = {}
    for r in rows:
        if r.get("status") == "measured" and r.get("loss_match") and r.get("samples_s"):
            windows = r.get("window_samples_s") or [r["samples_s"]]
            rates.setdefault((int(r["n"]), str(r["precision"])), []).extend(float(w) for w in windows)
    return {key: statistics.median(v) for key, v in rates.items()}


#: The confirmation round: when the runner-up is within this share of the best, both are measured
#: CONFIRM_ROUNDS more times, interleaved (a burst's windows are back to back, so they share any slow change in
#: a shared machine's load; bursts at other times do not).
CONFIRM_MARGIN = 0.25
CONFIRM_ROUNDS = 1


def choose(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The winner: the highest median aggregate samples/s (:func:`measured_rates`) among the settings whose loss
    matches fp32's.

    >>> choose([{"n": 1, "precision": "fp32", "status": "measured", "loss_match": True, "samples_s": 10.0},
    ...         {"n": 2, "precision": "fp32", "status": "measured", "loss_match": True, "samples_s": 30.0},
    ...         {"n": 2, "precision": "fp32", "status": "measured", "loss_match": True, "samples_s": 8.0},
    ...         {"n": 2, "precision": "fp32", "status": "measured", "loss_match": True, "samples_s": 9.0}])
    {'runs_per_gpu': 1, 'precision': 'fp32', 'samples_s': 10.0}
    """
    rates = measured_rates(rows)
    if not rates:
        raise RuntimeError("no calibration burst gave a usable measurement")
    (n, precision), rate = max(rates.items(), key=lambda item: item[1])
    return {"runs_per_gpu": n, "precision": precision, "samples_s": rate}


@dataclass
class Limits:
    """What bounds a calibration (see the module docstring)."""

    candidates: tuple[int, ...] = CANDIDATE_N
    precisions: tuple[str, ...] | None = None  # None: candidate_precisions(device), or the spec's own
    budget_cap_s: float | None = None  # None: BUDGET_CAP_S for the device type
    budget_fraction: float = BUDGET_FRACTION
    memory_bytes: int | None = None  # None: the device's (tests give a small one)
    memory_fraction: float = MEMORY_FRACTION
    gain_stop: float = GAIN_STOP
    warmup: int | None = None
    steps: int | None = None  # timed steps per window
    windows: int | None = None  # None: WINDOWS
    cpu_threads_per_run: int | None = 1  # torch threads of each burst worker on a CPU; None: the cores shared out
    fuse_candidates: tuple[int, ...] = ()  # fused group sizes K to measure (fuse: auto); () none
    capture: bool = False  # measure the captured step of the chosen fused group (capture: auto)


@dataclass
class Calibration:
    """A calibration entry (:attr:`doc`, as stored) and what this call did."""

    path: Path
    key: str
    doc: dict[str, Any]
    bursts_run: int = 0  # 0 when the entry was reused
    reused: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def runs_per_gpu(self) -> int:
        return int(self.doc["chosen"]["runs_per_gpu"])

    @property
    def precision(self) -> str:
        return str(self.doc["chosen"]["precision"])

    def ref(self) -> dict[str, Any]:
        """What a run's ``calibration`` option (and its record) names."""
        return calibration_ref(self)


def calibration_ref(cal: Calibration) -> dict[str, Any]:
    """``{"file", "device_kind", "shape", "runs_per_gpu", "precision"}`` and, where the calibration measured
    the batch layouts, ``padding`` (what ``padding: auto`` resolves to: :func:`harness.finetune.batching.choose_batching`),
    and where it measured a compiled step, ``compile`` (``on`` | ``off``: what ``compile: auto`` resolves to:
    :func:`harness.finetune.compilation.choose_compile`): the record's ``calibration`` field (the file relative to
    the grid's output)."""
    ref = {"file": f"calibration/{cal.path.name}", "device_kind": cal.doc["device"]["kind"], "shape": cal.key,
           "runs_per_gpu": cal.runs_per_gpu, "precision": cal.precision}
    for key in ("padding", "compile", "fuse"):
        if cal.doc["chosen"].get(key):
            ref[key] = cal.doc["chosen"][key]
    return ref


def candidate_layouts(spec: FinetuneSpec) -> tuple[str, ...]:
    """The batch layouts a calibration measures for ``spec``: with ``padding: auto``, every layout exact for its
    family (bucket, and flatten where the family flattens: :mod:`harness.finetune.flat`); none when the spec
    fixes its layout (it is measured as given).

    >>> candidate_layouts(FinetuneSpec("tiny:bert", "rte", 0)), candidate_layouts(FinetuneSpec("tiny:deberta", "rte", 0))
    (('bucket', 'flatten'), ())
    >>> candidate_layouts(FinetuneSpec("tiny:bert", "rte", 0, padding="pad"))
    ()
    """
    from harness.finetune.batching import FLAT_DECODERS, FLAT_ENCODERS
    from harness.models import resolve_model

    if spec.padding != AUTO:
        return ()
    family = resolve_model(spec.model, spec.model_args).family
    return ("bucket", "flatten") if family in FLAT_DECODERS or family in FLAT_ENCODERS else ()


def measure_layouts(spec: FinetuneSpec, layouts: Sequence[str], burst: Any) -> tuple[str | None, list[dict[str, Any]]]:
    """One burst per layout (``burst(layout)`` → a row, at the sweep's first N and precision); the fastest
    layout measured (its row then opens the sweep) and the rows, each with its ``padding``. None where no
    layout gave a rate.

    >>> rates = {"bucket": 10.0, "flatten": 14.0}
    >>> measure_layouts(None, ("bucket", "flatten"), lambda layout: {"status": "measured", "samples_s": rates[layout]})
    ('flatten', [{'status': 'measured', 'samples_s': 10.0, 'padding': 'bucket'}, {'status': 'measured', 'samples_s': 14.0, 'padding': 'flatten'}])
    """
    rows = [{**burst(layout), "padding": layout} for layout in layouts]
    timed = [r for r in rows if r["status"] == "measured" and r.get("samples_s")]
    return (max(timed, key=lambda r: r["samples_s"])["padding"] if timed else None), rows


def measure_compile(spec: FinetuneSpec, device: Device, rows: Sequence[Mapping[str, Any]], burst: Any, *,
                    time_left: float, spent: bool = False) -> dict[str, Any]:
    """``compile: auto``: one burst with the training step compiled at the setting the sweep chose (its layout, N
    and precision), against that setting's eager measurement. The compile happens in the burst's warm-up, which
    is not timed; its cost (the compiled burst's untimed seconds beyond the eager burst's) is weighed against a
    whole run instead: compiled is chosen only when a run of ``spec`` (:func:`training_samples`) at the compiled
    rate, plus that compile time, ends sooner than at the eager rate, and its losses match the eager ones
    (:func:`loss_matches`). ``burst()`` → the compiled burst's row; ``time_left``: seconds left in the budget.

    The result (the table's ``compile``): ``status`` measured | skipped | not measured, ``note``, ``rows`` and,
    where measured, ``chosen`` (``on`` | ``off``), the two rates and ``compile_s``.

    >>> cpu = Device("cpu-x", "cpu", "x", 1, 1)
    >>> measure_compile(FinetuneSpec("tiny:bert", "rte", 0), cpu, [], None, time_left=600)["note"]
    'not measured: CPU'
    >>> gpu = Device("gpu-x", "cuda", "x", 1, 1)
    >>> eager = {"n": 2, "precision": "bf16", "status": "measured", "loss_match": True, "samples_s": 100.0,
    ...          "seconds": 10.0, "wall_s": 30.0, "losses": [[20, 0.70]]}
    >>> compiled = {**eager, "samples_s": 150.0, "wall_s": 80.0}
    >>> out = measure_compile(FinetuneSpec("tiny:bert", "rte", 0), gpu, [eager], lambda: compiled, time_left=600)
    >>> out["chosen"], out["compile_s"], out["note"]
    ('on', 50.0, 'compiled 150.0 against eager 100.0 samples/s at N=2 bf16; compile 50 s per run: a run of 12450 samples takes 216 s against 249 s')
    >>> measure_compile(FinetuneSpec("tiny:bert", "rte", 0), gpu, [eager], lambda: compiled, time_left=60)["note"]
    'skipped for budget: 60 s left, a compiled burst takes about 120 s'
    """
    if spec.compile != AUTO:
        return {"status": "not measured", "note": f"not measured: the spec fixes compile {spec.compile}", "rows": []}
    if device.type != "cuda":
        from harness.finetune.compilation import CPU_NOTE

        return {"status": "not measured", "note": CPU_NOTE, "rows": []}
    rates = measured_rates(rows)
    if not rates:
        return {"status": "not measured", "note": "not measured: no eager setting was measured", "rows": []}
    (n, precision), eager_rate = max(rates.items(), key=lambda item: item[1])
    eager = next((r for r in rows if r.get("status") == "measured" and (r["n"], r["precision"]) == (n, precision)
                  and r.get("wall_s") is not None and r.get("seconds") is not None), None)
    if eager is None:  # only a burst cut at the budget measured it (then nothing more is started anyway)
        spent, eager = True, {}
    estimate = float(eager.get("wall_s") or 0.0) + COMPILE_ESTIMATE_S
    if spent or estimate > time_left:
        why = ("the budget was spent (a burst was cut at it)" if spent else
               f"{time_left:.0f} s left, a compiled burst takes about {estimate:.0f} s")
        return {"status": "skipped", "note": f"skipped for budget: {why}",
                "rows": [{"n": n, "precision": precision, "compile": "on", "status": "skipped",
                          "reason": f"budget: {why}"}]}
    row = {**burst(), "compile": "on"}
    out: dict[str, Any] = {"status": "measured", "rows": [row], "eager_samples_s": eager_rate}
    if row.get("status") != "measured" or not row.get("samples_s"):
        return {**out, "chosen": "off",
                "note": f"compiled burst {row.get('status')}: {row.get('reason', 'no rate')}; eager kept"}
    samples = training_samples(spec)
    w = weigh_one_time_cost(row, eager, eager_rate, runs=n, samples=samples)  # N runs share the rate
    note = (f"compiled {w['rate']:.1f} against eager {eager_rate:.1f} samples/s at N={n} {precision}; compile "
            f"{w['cost_s']:.0f} s per run: a run of {samples} samples takes {w['t_new']:.0f} s against "
            f"{w['t_eager']:.0f} s" + ("" if w["matches"] else "; its losses do not match eager's: eager kept"))
    return {**out, "chosen": w["chosen"], "compiled_samples_s": w["rate"], "compile_s": w["cost_s"], "note": note}


def weigh_one_time_cost(row: dict[str, Any], eager: Mapping[str, Any], eager_rate: float, *, runs: int,
                        samples: int) -> dict[str, Any]:
    """A burst whose warm-up paid a one-time cost (a compile, a capture) against the eager burst it would replace:
    its rate, that cost (its untimed seconds beyond the eager burst's), the time of ``runs`` runs of ``samples``
    each at either rate (the cost once), whether its losses match eager's (marked on ``row``), and ``chosen``:
    ``on`` where it ends sooner and matches (:func:`measure_compile`, :func:`measure_capture`).

    >>> weigh_one_time_cost({"samples_s": 200.0, "wall_s": 40.0, "seconds": 10.0, "losses": [[5, 0.7]]},
    ...                     {"wall_s": 15.0, "seconds": 10.0, "losses": [[5, 0.7]]}, 100.0, runs=2, samples=1000)
    {'rate': 200.0, 'cost_s': 25.0, 't_eager': 20.0, 't_new': 35.0, 'matches': True, 'chosen': 'off'}
    """
    rate = float(row["samples_s"])
    cost = max(0.0, (float(row.get("wall_s") or 0.0) - float(row.get("seconds") or 0.0))
               - (float(eager.get("wall_s") or 0.0) - float(eager.get("seconds") or 0.0)))
    t_eager, t_new = runs * samples / eager_rate, runs * samples / rate + cost
    matches = bool(row.get("cut")) or loss_matches(row.get("losses") or [], eager.get("losses") or [])
    row["loss_match"] = matches
    return {"rate": rate, "cost_s": cost, "t_eager": t_eager, "t_new": t_new, "matches": matches,
            "chosen": "on" if t_new < t_eager and matches else "off"}


def calibrate(spec: FinetuneSpec, *, device: Device, data_root: Path | None = None, grid_samples_total: int = 0,
              limits: Limits | None = None, fixed_n: int | None = None,
              cuda_device: str | None = None, log_dir: Path | None = None,
              burst: Any = None, fused_burst: Any = None) -> tuple[dict[str, Any], int]:
    """Run the bursts (see the module docstring); returns the table document and the number of bursts run.

    ``fixed_n``: N is fixed (``runs_per_gpu: 4``), only the precision is measured. ``log_dir``: where a failed
    worker's whole output is kept. ``burst`` / ``fused_burst``: what runs one burst (:func:`run_burst`'s and
    :func:`harness.finetune.fused.measure_fused_burst`'s signatures; tests give fixed measurement windows). The
    steps, in order: the layouts (:meth:`_Sweep.layouts`), the sweep of N per precision
    (:meth:`_Sweep.precision_sweep`), the confirmation round (:meth:`_Sweep.confirm`), fused groups
    (:meth:`_Sweep.fused_groups`), the compiled step (:meth:`_Sweep.compiled`), the document
    (:meth:`_Sweep.document`).
    """
    sweep = _Sweep(spec, device, data_root=data_root, grid_samples_total=grid_samples_total,
                   limits=limits or Limits(), fixed_n=fixed_n, cuda_device=cuda_device, log_dir=log_dir,
                   burst=burst or run_burst, fused_burst=fused_burst)
    try:
        with tempfile.TemporaryDirectory(prefix="vnr-calibration-") as tmp:
            sweep.work = Path(tmp)
            sweep.layouts()
            for precision in sweep.precisions:
                sweep.precision_sweep(precision)
            _mark_loss_matches(sweep.rows)
            sweep.confirm()
            _mark_loss_matches(sweep.rows)
            sweep.fused_groups()
            compiled = sweep.compiled()
    finally:
        sweep.sampler.close()
    _mark_loss_matches(sweep.rows)
    return sweep.document(compiled), sweep.bursts_run(compiled)


class _Sweep:
    """One calibration's state and its steps (:func:`calibrate`)."""

    def __init__(self, spec: FinetuneSpec, device: Device, *, data_root: Path | None, grid_samples_total: int,
                 limits: Limits, fixed_n: int | None, cuda_device: str | None, log_dir: Path | None, burst: Any,
                 fused_burst: Any = None):
        self.requested = self.spec = spec  # (the sweep trains the layout measured fastest, where layouts are measured)
        self.device, self.data_root, self.grid_samples_total = device, data_root, grid_samples_total
        self.limits, self.fixed_n, self.cuda_device, self.log_dir, self.run = limits, fixed_n, cuda_device, log_dir, burst
        self.memory = int(limits.memory_bytes if limits.memory_bytes is not None else device.memory_bytes)
        self.precisions: tuple[str, ...] = ((spec.precision,) if spec.precision != AUTO
                                            else tuple(limits.precisions or candidate_precisions(device)))
        self.candidates = (fixed_n,) if fixed_n else tuple(sorted(set(limits.candidates)))
        warmup, steps = STEPS[device.type]
        self.warmup = max(1, limits.warmup if limits.warmup is not None else warmup)  # the probe and the start need one
        self.steps = max(1, limits.steps if limits.steps is not None else steps)
        self.windows = max(1, limits.windows if limits.windows is not None else WINDOWS)
        self.cap = limits.budget_cap_s if limits.budget_cap_s is not None else BUDGET_CAP_S[device.type]
        self.threads = limits.cpu_threads_per_run if device.type == "cpu" else None
        self.rows: list[dict[str, Any]] = []
        self.layout_rows: list[dict[str, Any]] = []
        self.chosen_layout: str | None = None
        self.opened: dict[str, Any] | None = None  # the chosen layout's burst: the sweep's first row
        self.reused_opening = 0
        self.budget: float | None = None
        self.peak = 0
        self.last_wall: dict[int, float] = {}
        self.spent = False  # a burst was cut at the budget: nothing more is started
        self.started = time.time()
        self.sampler = DeviceSampler(device, cuda_device=cuda_device)
        self.work = Path(".")
        self.fused_run = fused_burst
        self.fuse: dict[str, Any] | None = None  # the fused groups' measurements (fuse: auto), where measured

    def deadline(self) -> float:
        """The budget is a hard cap: before the first rate is known, the cap."""
        return self.started + (self.budget if self.budget is not None else self.cap)

    def burst(self, spec: FinetuneSpec, n: int, precision: str) -> dict[str, Any]:
        return self.run(spec, n, precision, device=self.device, warmup=self.warmup, steps=self.steps,
                        data_root=self.data_root, work=self.work, sampler=self.sampler, cuda_device=self.cuda_device,
                        windows=self.windows, log_dir=self.log_dir, deadline=self.deadline(), threads=self.threads)

    def spent_reason(self) -> str:
        return f"budget: {self.deadline() - self.started:.0f} s spent (a burst was cut at it)"

    # -- step 1: the layouts
    def layouts(self) -> None:
        """``padding: auto``: each exact layout at the first N and precision; the fastest is swept."""
        layouts = candidate_layouts(self.spec)
        if not layouts:
            return
        first_n, first_precision = self.candidates[0], self.precisions[0]

        def counted(layout: str) -> dict[str, Any]:
            if self.spent:
                return {"n": first_n, "precision": first_precision, "status": "skipped", "reason": self.spent_reason()}
            try:
                row = self.burst(replace(self.spec, padding=layout), first_n, first_precision)
            except RuntimeError as exc:  # this layout does not train here: the others are measured
                log.warning("calibration burst padding %s failed: %s", layout, exc)
                return {"n": first_n, "precision": first_precision, "status": "failed",
                        "reason": f"failed: {str(exc).strip()[:300]}"}
            self.spent = self.spent or bool(row.get("cut"))
            return row

        chosen, self.layout_rows = measure_layouts(self.spec, layouts, counted)
        self.chosen_layout = chosen or layouts[0]
        self.opened = next((r for r in self.layout_rows if r["padding"] == self.chosen_layout
                            and r["status"] != "skipped"), None)  # (measured, cut or failed: the first burst)
        if self.opened is not None and self.opened["status"] == "failed":
            raise UserError(f"calibration: the grid's first fine-tuning spec does not train: "
                            f"{self.opened['reason'].removeprefix('failed: ')}")
        self.spec = replace(self.spec, padding=self.chosen_layout)

    # -- step 2: N per precision
    def skip_reason(self, n: int, precision: str) -> str | None:
        """Why the burst at (n, precision) is not started (budget spent or passed, memory), else None."""
        if self.opened is not None and (n, precision) == (self.candidates[0], self.precisions[0]):
            return None  # measured above (its layout's burst)
        if self.spent:
            return self.spent_reason()
        if self.peak and n * self.peak > self.limits.memory_fraction * self.memory:
            return (f"memory: {n} x {self.peak / 2**30:.2f} GiB > {self.limits.memory_fraction:.0%} of "
                    f"{self.memory / 2**30:.2f} GiB")
        if self.rows and self.budget is not None and self.last_wall:
            estimate = self.last_wall.get(n) or max(self.last_wall.values()) * (n / max(self.last_wall))
            if time.time() - self.started + estimate > self.budget:
                return f"budget: {self.budget:.0f} s would be passed (about {estimate:.0f} s more)"
        return None

    def measure(self, n: int, precision: str) -> dict[str, Any]:
        """The burst at (n, precision) (the opening layout burst where it is that one), its row recorded."""
        if self.opened is not None and (n, precision) == (self.candidates[0], self.precisions[0]):
            row, self.opened = {k: v for k, v in self.opened.items() if k != "padding"}, None  # measured above
            self.reused_opening = 1
        else:
            row = self.burst(self.spec, n, precision)
        self.rows.append(row)
        if row.get("cut"):
            self.spent = True
            if row["status"] != "measured":
                return row
        else:
            self.last_wall[n] = row["wall_s"]
        self.peak = max(self.peak, row["peak_memory_bytes"] or 0)
        if self.budget is None and row["samples_s"]:  # the grid's projected time at one run per device
            self.budget = min(self.cap, self.limits.budget_fraction * self.grid_samples_total / row["samples_s"])
        return row

    def failed(self, n: int, precision: str, exc: RuntimeError, later: Sequence[int]) -> None:
        """A burst that failed (e.g. out of memory at this N): the sweep of this precision goes on without it."""
        if not self.rows:
            raise UserError(f"calibration: the grid's first fine-tuning spec does not train: {exc}") from None
        log.warning("calibration burst %s N=%d failed: %s", precision, n, exc)
        text = str(exc).strip()
        self.rows.append({"n": n, "precision": precision, "status": "failed",
                          "reason": f"failed: {text.splitlines()[-1][:300] if text else exc}"})
        self.rows.extend({"n": m, "precision": precision, "status": "skipped", "reason": f"N={n} failed"}
                         for m in later)

    def remeasured(self, n: int, precision: str) -> float | None:
        """The rate at ``n`` measured again now (a gain shortfall may be one contended burst: the N before is
        measured under the same load before the sweep stops), or None where no burst could be started."""
        if self.skip_reason(n, precision) is not None or self.spent:
            return None
        try:
            row = self.burst(self.spec, n, precision)
        except RuntimeError as exc:
            log.warning("calibration re-measurement %s N=%d failed: %s", precision, n, exc)
            return None
        self.rows.append({**row, "remeasured": True})
        self.spent = self.spent or bool(row.get("cut"))
        if not row.get("cut"):
            self.last_wall[n] = row["wall_s"]
        return row.get("samples_s") if row.get("status") == "measured" else None

    def precision_sweep(self, precision: str) -> None:
        """N = 1, 2, 4, ... at one precision, until a bound skips the rest or N gains less than
        ``gain_stop`` over the N before, that N re-measured first."""
        previous: tuple[int, float] | None = None
        for i, n in enumerate(self.candidates):
            skip = self.skip_reason(n, precision)
            if skip:
                self.rows.append({"n": n, "precision": precision, "status": "skipped", "reason": skip})
                continue
            try:
                row = self.measure(n, precision)
            except RuntimeError as exc:
                self.failed(n, precision, exc, self.candidates[i + 1:])
                return
            if row.get("cut") and row["status"] != "measured":
                continue
            rate = row["samples_s"] or 0.0
            if previous is not None and rate < previous[1] * (1 + self.limits.gain_stop):
                again = self.remeasured(previous[0], precision)
                if again is None or rate < again * (1 + self.limits.gain_stop):
                    why = (f"gain: N={n} gained < {self.limits.gain_stop:.0%} over the N before"
                           + (f" (N={previous[0]} re-measured: {again:.1f} samples/s)" if again is not None else ""))
                    self.rows.extend({"n": m, "precision": precision, "status": "skipped", "reason": why}
                                     for m in self.candidates[i + 1:])
                    return
            previous = (n, rate)

    # -- step 3: the confirmation round
    def confirm(self) -> None:
        """One burst is one moment of a machine's load: when the two best settings are within CONFIRM_MARGIN of
        each other, both are measured again, interleaved, and the medians decide (budget permitting)."""
        ranked = sorted(measured_rates(self.rows).items(), key=lambda item: -item[1])
        if len(ranked) < 2 or ranked[1][1] < (1 - CONFIRM_MARGIN) * ranked[0][1]:
            return
        for _ in range(CONFIRM_ROUNDS):
            for n, precision in (ranked[1][0], ranked[0][0]):
                if self.spent or time.time() - self.started + self.last_wall.get(n, 0.0) > self.deadline() - self.started:
                    continue
                row = self.burst(self.spec, n, precision)
                self.rows.append({**row, "confirmation": True})
                self.spent = self.spent or bool(row.get("cut"))

    # -- step 4: fused groups
    def fused_groups(self) -> None:
        """``fuse: auto`` (:attr:`Limits.fuse_candidates`): K runs fused into one stacked model, K growing while it
        gains ``gain_stop`` over the K before and the budget holds it (a fused burst estimated at K times the
        N = 1 burst's wall time, an upper bound); K is chosen where the best fused group's samples/s beats the
        best unfused setting's by ``gain_stop``."""
        ks = tuple(sorted(set(self.limits.fuse_candidates)))
        if not ks:
            return
        from harness.finetune.fused import fusable_spec

        if not fusable_spec(self.requested):  # the runs' own spec (the sweep's may be flattened)
            self.fuse = {"rows": [], "chosen": 1, "note": "not measured: the spec's runs cannot be fused"}
            return
        run = self.fused_run
        if run is None:
            from harness.finetune.fused import measure_fused_burst as run
        rows: list[dict[str, Any]] = []
        previous = None
        wall = self.last_wall.get(1) or (max(self.last_wall.values()) if self.last_wall else None)
        for i, k in enumerate(ks):
            estimate = (wall or 0.0) * k
            skip = (self.spent_reason() if self.spent else
                    f"budget: {self.deadline() - time.time():.0f} s left, a fused burst of {k} takes up to "
                    f"{estimate:.0f} s" if time.time() + estimate > self.deadline() else None)
            if skip:
                rows.append({"n": 1, "fuse": k, "precision": "fp32", "status": "skipped", "reason": skip})
                continue
            try:
                row = run(self.requested, k, warmup=self.warmup, steps=self.steps, windows=self.windows,
                          data_root=self.data_root, deadline=self.deadline())
            except (RuntimeError, UserError) as exc:  # e.g. out of memory at this K: larger K are not tried
                text = str(exc).strip()
                rows.append({"n": 1, "fuse": k, "precision": "fp32", "status": "failed",
                             "reason": f"failed: {text.splitlines()[-1][:300] if text else exc}"})
                rows.extend({"n": 1, "fuse": m, "precision": "fp32", "status": "skipped", "reason": f"K={k} failed"}
                            for m in ks[i + 1:])
                break
            rows.append(row)
            if row.get("cut"):
                self.spent = True
                continue
            wall = row.get("wall_s") or wall
            rate = row.get("samples_s") or 0.0
            if previous is not None and rate < previous * (1 + self.limits.gain_stop):
                rows.extend({"n": 1, "fuse": m, "precision": "fp32", "status": "skipped",
                             "reason": f"gain: K={k} gained < {self.limits.gain_stop:.0%} over the K before"}
                            for m in ks[i + 1:])
                break
            previous = rate
        timed = [r for r in rows if r["status"] == "measured" and r.get("samples_s")]
        unfused = choose(self.rows)["samples_s"] if measured_rates(self.rows) else None
        best = max(timed, key=lambda r: r["samples_s"]) if timed else None
        chosen = 1
        if best is not None and (unfused is None or best["samples_s"] >= unfused * (1 + self.limits.gain_stop)):
            chosen = int(best["fuse"])
        note = ("no fused group measured" if best is None else
                f"fused K={best['fuse']} {best['samples_s']:.1f} samples/s against unfused "
                f"{unfused:.1f}" if unfused else f"fused K={best['fuse']} {best['samples_s']:.1f} samples/s")
        self.fuse = {"rows": rows, "chosen": chosen, "note": note + f"; chosen: K={chosen}"}
        if self.limits.capture and chosen > 1:
            eager = max((r for r in timed if r["fuse"] == chosen), key=lambda r: r["samples_s"])
            self.fuse["capture"] = measure_capture(
                self.requested, self.device, eager,
                lambda: run(self.requested, chosen, warmup=self.warmup, steps=self.steps, windows=self.windows,
                            data_root=self.data_root, deadline=self.deadline(), capture=True),
                time_left=self.deadline() - time.time(), spent=self.spent)

    # -- step 5: the compiled step
    def compiled(self) -> dict[str, Any]:
        best = choose(self.rows) if measured_rates(self.rows) else None

        def compiled_burst() -> dict[str, Any]:  # at the chosen layout, N and precision
            try:
                return self.burst(replace(self.spec, compile="on"), best["runs_per_gpu"], best["precision"])
            except RuntimeError as exc:  # compile fails here: eager
                log.warning("calibration burst compile on failed: %s", exc)
                return {"status": "failed", "reason": f"failed: {str(exc).strip()[:300]}"}

        return measure_compile(self.spec, self.device, self.rows, compiled_burst,
                               time_left=self.deadline() - time.time(), spent=self.spent)

    # -- step 6: the document
    def chosen(self, compiled: Mapping[str, Any]) -> dict[str, Any]:
        if measured_rates(self.rows):
            return {**choose(self.rows), **({"padding": self.chosen_layout} if self.chosen_layout else {}),
                    **({"compile": compiled["chosen"]} if compiled.get("chosen") else {}),
                    **({"fuse": self.fuse["chosen"]} if self.fuse and self.fuse["chosen"] > 1 else {}),
                    **({"capture": self.fuse["capture"]["chosen"]}
                       if self.fuse and (self.fuse.get("capture") or {}).get("chosen") else {})}
        n, precision = self.fixed_n or 1, self.precisions[0]
        return {"runs_per_gpu": n, "precision": precision, "samples_s": None, "measured": False,
                "note": f"nothing measured within the budget ({self.deadline() - self.started:.0f} s): {n} run(s) "
                        f"per device at {precision}, unmeasured; not stored (raise calibration_budget_s)"}

    def document(self, compiled: dict[str, Any]) -> dict[str, Any]:
        spec, limits = self.spec, self.limits
        return {
            "device": asdict(self.device) | {"memory_bytes_used_for_bound": self.memory},
            "spec": {"run_id": self.requested.run_id(), "model": spec.model, "task": spec.task,
                     "max_length": spec.max_length, "batch_size": spec.batch_size, "precision": spec.precision},
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "bounds": {"candidates": list(self.candidates), "precisions": list(self.precisions),
                       "warmup_steps": self.warmup, "timed_steps": self.steps, "windows": self.windows,
                       "budget_s": self.deadline() - self.started, "budget_cap_s": self.cap,
                       "cpu_threads_per_run": self.threads,
                       "budget_fraction": limits.budget_fraction, "grid_samples": self.grid_samples_total,
                       "memory_fraction": limits.memory_fraction, "gain_stop": limits.gain_stop,
                       "loss_rtol": LOSS_RTOL},
            "rows": self.rows,
            **({"layouts": self.layout_rows} if self.layout_rows else {}),
            "compile": compiled,
            **({"fuse": self.fuse} if self.fuse is not None else {}),
            "chosen": self.chosen(compiled),
            "elapsed_s": time.time() - self.started,
        }

    def bursts_run(self, compiled: Mapping[str, Any]) -> int:
        fused = [*self.fuse["rows"], *(self.fuse.get("capture") or {}).get("rows", [])] if self.fuse else []
        return sum(r["status"] in ("measured", "cut")
                   for r in [*self.rows, *self.layout_rows, *compiled["rows"], *fused]) - self.reused_opening


def _mark_loss_matches(rows: list[dict[str, Any]]) -> None:
    """``loss_match`` on every measured row: fp32 rows match by definition; others against fp32 at the same N,
    else fp32 at N = 1 (rows of a precision given alone, with no fp32 measured, are taken as they are)."""
    fp32 = {r["n"]: r for r in rows if r["status"] == "measured" and r["precision"] == "fp32"}
    for r in rows:
        if r["status"] != "measured":
            continue
        if r["precision"] == "fp32" or not fp32:
            r["loss_match"] = bool(r.get("samples_s"))
            continue
        ref = fp32.get(r["n"]) or fp32[min(fp32)]
        r["loss_match"] = loss_matches(r["losses"], ref["losses"])


# ---------------------------------------------------------------------- files
def calibration_path(output: str | Path, device_kind: str) -> Path:
    return Path(output) / "calibration" / f"{device_kind}.json"


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (blocking: a second task waits, then reads what the first wrote)."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_calibrations(path: Path) -> dict[str, Any]:
    """A device kind's calibration file (``{"device_kind", "entries": {shape key: entry}}``); empty if none.
    Its schema and device identity: :mod:`harness.grid.calibration_file` (one-line errors)."""
    from harness.grid.calibration_file import read_calibration_file

    return read_calibration_file(path)


def ensure_calibration(spec: FinetuneSpec, output: str | Path, *, data_root: Path | None = None,
                       grid_samples_total: int = 0, limits: Limits | None = None, fixed_n: int | None = None,
                       device: Device | None = None, cuda_device: str | None = None) -> Calibration:
    """This device kind's calibration for ``spec``'s shape: reused from the file, else measured and added."""
    from harness.store import atomic_write_json

    device = device or detect_device(cuda_device)
    path = calibration_path(output, device.kind)
    key = shape_key(spec) + (f",runs_per_gpu={fixed_n}" if fixed_n else "")
    with _locked(path.with_suffix(".lock")):
        doc = read_calibrations(path)
        entry = doc["entries"].get(key)
        if entry is not None:
            return Calibration(path, key, entry, reused=True)
        notes = []
        if doc["entries"]:
            notes.append(f"{path} has calibrations for {', '.join(sorted(doc['entries']))}; this grid's first spec "
                         f"has shape {key}: calibrating it")
        entry, bursts = calibrate(spec, device=device, data_root=data_root, grid_samples_total=grid_samples_total,
                                  limits=limits, fixed_n=fixed_n, cuda_device=cuda_device,
                                  log_dir=Path(output) / "logs" / "calibration")
        if entry["chosen"].get("measured", True):  # an unmeasured fallback is not reused by later grids
            atomic_write_json(path, {"device_kind": device.kind, "entries": {**doc["entries"], key: entry}})
        else:
            notes.append(entry["chosen"]["note"])
    return Calibration(path, key, entry, bursts_run=bursts, notes=notes)


# ---------------------------------------------------------------------- what a grid uses
@dataclass(frozen=True)
class Packing:
    """What a grid runs with: runs per device, and the calibration behind it (None where none ran)."""

    runs_per_gpu: int
    calibration: Calibration | None = None
    reason: str = ""

    def options(self, spec: Any) -> dict[str, Any]:
        """The run option every calibrated run (fine-tuning) gets: the calibration it runs under."""
        if self.calibration is None or not kind_of(spec).calibrated:
            return {}
        return {"calibration": self.calibration.ref()}


def gpu_present(gpus: Sequence[int | str] | None = None) -> bool:
    """Whether the executor would place runs on a GPU (``gpus`` given, else any visible)."""
    if gpus is not None:
        return len(list(gpus)) > 0
    return bool(visible_gpus())


def resolve_packing(specs: Sequence[Any], output: str | Path, *, runs_per_gpu: int | str | None,
                    calibrate_runs: bool = True, data_root: Path | None = None, gpus: Sequence[int | str] | None = None,
                    limits: Limits | None = None, device: Device | None = None, first: FinetuneSpec | None = None,
                    samples: int | None = None) -> Packing:
    """Runs per device and the calibration for the runs ``specs`` (the local executor and each SLURM array
    task call this).

    ``runs_per_gpu``: a number (fixed), ``"auto"`` (calibrate on whatever device this is), or None
    (the default: ``auto`` where a GPU is used, else 1). ``calibrate_runs=False`` (``--no-calibrate``): no
    bursts; ``auto`` is then 1 and precision ``auto`` follows the rule. ``first``: the spec to calibrate
    with (the grid's first fine-tuning spec; default: the first in ``specs``); ``samples``: the training
    samples the time budget is a share of (default: those of ``specs``). Nothing is measured when
    ``specs`` holds no fine-tuning run and no ``first`` is given (an array task of bias runs is given the
    grid's, so it packs them as calibrated), or when N is fixed and so are the precision and ``compile`` (given
    by the spec, or fp32 and eager as the only candidates without a GPU).
    """
    if runs_per_gpu is None:
        runs_per_gpu = AUTO if gpu_present(gpus) else 1
    fixed_n = None if runs_per_gpu == AUTO else int(runs_per_gpu)
    if not calibrate_runs:
        return Packing(fixed_n or 1, None, "calibration off")
    measured = calibrated(specs)
    if not measured and (first is None or not specs):
        return Packing(fixed_n or 1, None, "no fine-tuning run to calibrate for")
    first = first or measured[0]  # (an array task of bias runs: the grid's)
    if fixed_n is not None and (not gpu_present(gpus) or (first.precision != AUTO and first.compile != AUTO)):
        return Packing(fixed_n, None, "fixed (nothing left to measure)")
    cal = ensure_calibration(first, output, data_root=data_root,
                             grid_samples_total=grid_samples(specs) if samples is None else samples,
                             limits=limits, fixed_n=fixed_n, device=device,
                             cuda_device=str(list(gpus)[0]) if gpus else None)  # on the first GPU the grid uses
    return Packing(fixed_n or cal.runs_per_gpu, cal, "reused" if cal.reused else "calibrated")


def resolve_capture(capture: str | None, calibrated: str | None = None) -> str | None:
    """What chose to capture fused groups' steps, or None where they are not captured: ``on`` always, ``off``
    never, ``auto`` (None) where the calibration measured it faster.

    >>> resolve_capture("on"), resolve_capture(None, "on"), resolve_capture("auto", "off"), resolve_capture("off", "on")
    ('the capture setting', 'calibration', None, None)
    """
    if capture == "on":
        return "the capture setting"
    if capture in (None, "auto") and calibrated == "on":
        return "calibration"
    return None


def resolve_fuse(fuse: int | str | None, calibrated: int | None = None) -> tuple[int, str]:
    """(K, what chose it) for ``fuse``: an explicit K, else the calibration's K, else 1 (not fused).

    >>> resolve_fuse(5), resolve_fuse("auto", 4), resolve_fuse(None)[0]
    ((5, 'the fuse setting'), (4, 'calibration'), 1)
    """
    if fuse not in (None, "auto"):
        return int(fuse), "the fuse setting"
    if calibrated:
        return int(calibrated), "calibration"
    return 1, "rule (no calibration measured K): not fused"


def local_packing(exp: Any, specs: Sequence[Any], pending: Sequence[Any], *, runs_per_gpu: int | str | None = None,
                  calibrate_runs: bool = True, data_root: Path | None = None) -> tuple[Packing, dict[str, Any]]:
    """What the local executor runs a grid's ``pending`` specs with (``vnr run`` and :func:`harness.api.run_grid`):
    the :class:`Packing` (``runs_per_gpu`` given, else the config's ``local:``; calibrated where ``auto``) and
    :func:`harness.grid.local.execute`'s packing keywords (only those that differ from its defaults)."""
    check_gpus(exp.local.gpus, exp.source)  # an index this machine lacks: refused, not run on the CPU
    per_gpu = runs_per_gpu if runs_per_gpu is not None else exp.local.runs_per_gpu
    fuse_auto = exp.local.fuse in (None, AUTO)
    plan = resolve_packing(pending, exp.output, runs_per_gpu=per_gpu, calibrate_runs=exp.local.calibrate and calibrate_runs,
                           data_root=data_root, gpus=exp.local.gpus,
                           limits=Limits(budget_cap_s=exp.local.calibration_budget_s,
                                         fuse_candidates=FUSE_CANDIDATES if fuse_auto else (),
                                         capture=exp.local.capture in (None, AUTO)),
                           first=next(iter(calibrated(specs)), None) if calibrated(pending) else None)
    if plan.calibration is None and per_gpu == AUTO:
        plan = replace(plan, reason=f"{plan.reason}; precision auto follows the rule")
    kwargs: dict[str, Any] = {}
    if plan.runs_per_gpu != 1:
        kwargs["runs_per_gpu"] = plan.runs_per_gpu
    if exp.local.gpus is not None:
        kwargs["gpus"] = list(exp.local.gpus)
    fuse, fuse_source = resolve_fuse(exp.local.fuse, plan.calibration.doc.get("chosen", {}).get("fuse")
                                     if plan.calibration is not None else None)
    if fuse != 1:
        kwargs["fuse"] = fuse
        log.info("fuse %d (%s)", fuse, fuse_source)
        capture = resolve_capture(exp.local.capture, plan.calibration.doc.get("chosen", {}).get("capture")
                                  if plan.calibration is not None else None)
        if capture is not None:
            kwargs["capture"] = capture
            log.info("fused groups' steps captured (%s)", capture)
    elif exp.local.capture == "on":  # asked for, and nothing is fused to capture: said, not silently dropped
        log.warning("capture on: fuse auto fused nothing here (%s): the runs train alone, uncaptured; give --fuse K "
                    "to fuse (and capture) without a calibration", fuse_source)
    return plan, kwargs


def format_table(cal: Calibration) -> str:
    """The calibration as a table (what ``vnr run`` prints)."""
    doc = cal.doc
    dev = doc["device"]
    where = (str(cal.path) if doc["chosen"].get("measured", True)  # an unmeasured fallback is not stored
             else "(not stored: nothing measured)")
    lines = [f"calibration {where} ({'reused' if cal.reused else f'{cal.bursts_run} bursts'}), "
             f"{dev['name']} [{dev['kind']}], spec shape {cal.key}",
             f"{'N':>3} {'precision':>9} {'samples/s':>10} {'util %':>7} {'W':>6} {'peak GiB':>9} {'loss ok':>7}  note"]

    def num(v: Any, fmt: str) -> str:
        return format(v, fmt) if v is not None else "-"

    def settings(status: str, why: str = "") -> str:
        compiled = (doc.get("compile") or {}).get("rows", [])
        picked = [f"{'compiled ' if r.get('compile') == 'on' else ''}N={r['n']} {r['precision']}"
                  for r in [*doc["rows"], *compiled]
                  if r["status"] == status and str(r.get("reason", "")).startswith(why)]
        return ", ".join(dict.fromkeys(picked)) or "none"

    lines.insert(1, f"measured: {settings('measured')}; skipped for budget: {settings('skipped', 'budget')}; "
                    f"cut at the budget and discarded: {settings('cut')}; budget {num(doc['bounds'].get('budget_s'), '.0f')} s, "
                    f"used {num(doc.get('elapsed_s'), '.0f')} s")
    if doc.get("layouts"):
        lines.insert(2, "padding auto, each exact layout at the first N and precision: " + ", ".join(
            f"{r['padding']} {num(r.get('samples_s'), '.1f')} samples/s" + ("" if r["status"] == "measured"
                                                                          else f" ({r['status']})")
            for r in doc["layouts"]) + f"; the sweep below is {doc['chosen'].get('padding', '-')}")
    if doc.get("fuse"):  # fuse: auto (entries from before fused groups were measured have none)
        fused = doc["fuse"]
        shown = ", ".join(f"K={r['fuse']} " + (f"{r['samples_s']:.1f} samples/s" if r["status"] == "measured"
                                              else f"{r['status']} ({r.get('reason', '')})") for r in fused["rows"])
        lines.insert(len(lines) - 1, f"fuse auto: {shown or fused['note']}; {fused['note']}")
        if fused.get("capture"):
            lines.insert(len(lines) - 1, "capture auto: " + fused["capture"]["note"]
                         + (f"; chosen: {fused['capture']['chosen']}" if fused["capture"].get("chosen") else ""))
    if doc.get("compile"):  # (entries from before compile was measured have none)
        lines.insert(len(lines) - 1, "compile auto: " + doc["compile"]["note"]
                     + (f"; chosen: {doc['compile']['chosen']}" if doc["compile"].get("chosen") else ""))
    for r in doc["rows"]:
        if r["status"] != "measured":
            lines.append(f"{r['n']:>3} {r['precision']:>9} {'-':>10} {'-':>7} {'-':>6} {'-':>9} {'-':>7}  {r['reason']}")
            continue

        peak = r["peak_memory_bytes"] / 2**30 if r["peak_memory_bytes"] is not None else None
        lines.append(f"{r['n']:>3} {r['precision']:>9} {num(r['samples_s'], '.1f'):>10} "
                     f"{num(r['utilisation_pct'], '.0f'):>7} {num(r['power_w'], '.0f'):>6} "
                     f"{num(peak, '.2f'):>9} {'yes' if r.get('loss_match') else 'no':>7}"
                     f"{'  confirmation' if r.get('confirmation') else ''}{'  ' + r['note'] if r.get('note') else ''}")
    chosen = doc["chosen"]
    compiled_rate = (f"; compiled {doc['compile']['compiled_samples_s']:.1f}"
                     if (doc.get("compile") or {}).get("compiled_samples_s") else "")
    if chosen.get("samples_s") is None:
        lines.append(f"chosen: runs_per_gpu {chosen['runs_per_gpu']}, precision {chosen['precision']} "
                     f"({chosen.get('note', 'unmeasured')})")
    else:
        lines.append(f"chosen: runs_per_gpu {chosen['runs_per_gpu']}, precision {chosen['precision']}"
                     f"{', padding ' + chosen['padding'] if chosen.get('padding') else ''}"
                     f"{', compile ' + chosen['compile'] if chosen.get('compile') else ''}"
                     f"{', fuse ' + str(chosen['fuse']) if chosen.get('fuse') else ''}"
                     f"{', capture ' + chosen['capture'] if chosen.get('capture') else ''} "
                     f"({chosen['samples_s']:.1f} samples/s{' eager' if chosen.get('compile') else ''}, the median "
                     f"of its timed windows{compiled_rate})")
    return "\n".join([*cal.notes, *lines])


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m harness.grid.calibrate --worker PLAN``: one burst worker (started by :func:`run_burst`)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] != "--worker":
        print("usage: python -m harness.grid.calibrate --worker PLAN_JSON (started by the calibration)", file=sys.stderr)
        return 2
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    logging.basicConfig(level=logging.WARNING)
    plan = BurstPlan(**json.loads(args[1]))
    result = run_worker(plan)
    from harness.store import atomic_write_json

    atomic_write_json(plan.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
