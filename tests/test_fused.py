"""Fused runs (harness.finetune.fused): each of K runs trained as one stacked model gives what it gives alone.

The solo twin is the straightforward way: the model's own forward on its own padded batch with its 2-D padding
mask and its own pooling and loss, ``torch.optim.AdamW`` with the Trainer's decay groups, ``clip_grad_norm_`` and
the linear schedule, in its seed's data order. Dropout off, fp32: losses, gradients and weights agree within
1e-5 relative over 24 steps, for every fusable family."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from harness.finetune import fused  # noqa: E402
from harness.models import load_model  # noqa: E402
from ranking.floor.errors import UserError  # noqa: E402

TEXTS = [f"the {w} sat on a mat number {i} while {v} ran far away" * (1 + i % 3)
         for i, (w, v) in enumerate(zip(["cat", "dog", "bird", "fish", "cow", "owl"] * 5,
                                        ["a fox", "the sun", "rain", "it", "we", "they"] * 5))]
N, BATCH, STEPS, SEEDS = 24, 4, 24, (0, 1, 2)
TOL = 1e-5
LR = 1e-4


def _no_dropout(model):
    for module in model.modules():
        if isinstance(module, torch.nn.Dropout):
            module.p = 0.0
    return model


def _models(family, seeds=SEEDS, dropout=False):
    models, tok = [], None
    for seed in seeds:
        model, tok, _ = load_model(f"tiny:{family}", "sequence_classification", texts=TEXTS, num_labels=2,
                                   seed=seed, tokenizer=tok)
        fused._eager_attention(model)
        models.append(model if dropout else _no_dropout(model))
    return models, tok


def _rows(tok):
    enc = tok(TEXTS[:N], truncation=True, max_length=64)
    return [{**{k: enc[k][i] for k in enc}, "label": i % 2} for i in range(N)]


def _rel(a, b, floor=0.0):
    """||a - b|| / max(||b||, floor)."""
    return float((a - b).norm() / b.norm().clamp_min(max(floor, 1e-30)))


def _solo(model, rows, seed, tok, widths, steps=STEPS, lr=LR, wd=0.01):
    """The run alone, the straightforward way; per step its loss and gradients (copies). Each batch is padded to
    ``widths[step]`` (the fused group's width at that step): the same layout, so what differs is fusion alone."""
    from transformers import Trainer, get_linear_schedule_with_warmup

    decay = set(Trainer.get_decay_parameter_names(None, model))
    named = dict(model.named_parameters())
    opt = torch.optim.AdamW([{"params": [p for n, p in named.items() if n in decay], "weight_decay": wd},
                             {"params": [p for n, p in named.items() if n not in decay], "weight_decay": 0.0}],
                            lr=lr, foreach=False)
    sched = get_linear_schedule_with_warmup(opt, 0, steps)
    per_epoch = -(-len(rows) // BATCH)
    losses, grads = [], []
    model.train()
    for step in range(steps):
        epoch, within = divmod(step, per_epoch)
        order = fused.epoch_order(len(rows), seed, epoch)[within * BATCH:(within + 1) * BATCH]
        feats = [{k: v for k, v in rows[i].items() if k != "label"} for i in order]
        batch = tok.pad(feats, return_tensors="pt", padding="max_length", max_length=widths[step])
        if "token_type_ids" in batch and "distilbert" in type(model).__name__.lower():
            del batch["token_type_ids"]
        labels = torch.tensor([rows[i]["label"] for i in order])
        opt.zero_grad()
        out = model(**batch, labels=labels)
        out.loss.backward()
        losses.append(float(out.loss.detach()))
        grads.append({n: p.grad.detach().clone() for n, p in named.items()})
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
    return losses, grads


def _fused_and_solo(family, dtype, seeds=SEEDS, lrs=None, wds=None):
    """(max relative error of the losses, of the whole gradients, of the whole final weights) of each fused run
    against its solo twin over STEPS steps."""
    from transformers import Trainer

    models, tok = _models(family, seeds)
    models = [m.to(dtype) for m in models]
    rows = _rows(tok)
    lrs, wds = lrs or [LR] * len(seeds), wds or [0.01] * len(seeds)
    stack = fused.StackedRuns(models, learning_rates=lrs, weight_decays=wds,
                              regression=False, decay=set(Trainer.get_decay_parameter_names(None, models[0])))
    seen = []  # per step: the fused losses, gradients and batch width, taken by wrapping loss_and_grads
    original = stack.loss_and_grads

    def watched(batch, **kw):
        losses, grads = original(batch, **kw)
        seen.append((losses.clone(), {n: g.clone() for n, g in grads.items()}, batch["input_ids"].shape[-1]))
        return losses, grads

    stack.loss_and_grads = watched
    fused.train_group(stack, [rows] * len(seeds), seeds, batch_size=BATCH, total_steps=STEPS, warmup=0,
                      pad_id=tok.pad_token_id, causal=family in fused.LAST_TOKEN)
    assert len(seen) == STEPS
    errors = {"loss": 0.0, "gradients": 0.0, "weights": 0.0}
    for k, (model, seed) in enumerate(zip(models, seeds)):
        losses, grads = _solo(model, rows, seed, tok, [width for _, _, width in seen], lr=lrs[k], wd=wds[k])
        scale = float(torch.tensor([_norm(g) for g in grads]).median())  # the run's typical gradient norm
        for step in range(STEPS):
            errors["loss"] = max(errors["loss"], abs(float(seen[step][0][k]) - losses[step]) / abs(losses[step]))
            errors["gradients"] = max(errors["gradients"], _whole({n: g[k] for n, g in seen[step][1].items()},
                                                                  grads[step], floor=scale))
        errors["weights"] = max(errors["weights"], _whole(stack.state_dict(k),
                                                          {n: p.detach() for n, p in model.named_parameters()}))
    # the runs differ from each other (own seeds, own data order)
    head = list(stack.params)[-2]  # the head's last weight
    assert _rel(stack.state_dict(0)[head], stack.state_dict(1)[head]) > 1e-3
    return errors


def _norm(tensors):
    """The norm of every tensor laid end to end."""
    return float(torch.sqrt(sum((t.double() ** 2).sum() for t in tensors.values())))


def _whole(got, want, floor=0.0):
    """||got - want|| / max(||want||, floor) with every tensor laid end to end.

    ``floor`` (for gradients: the run's median gradient norm) is the scale float rounding works at. A batch
    gradient is a sum of per-example gradients, and its rounding error is bounded by eps times the sum of their
    sizes, not by eps times the size of the sum: at a step where they cancel (a balanced batch at loss ln 2, the
    gradient 100x below its usual norm) the same 1e-7 absolute difference reads 1e-5 against the small sum,
    measuring the cancellation, not fusion. Measured (bert, fp32, 24 steps): 1.6e-5 against each step's own norm
    at such a step, 2e-7 against the run's median norm; the absolute difference is about 1e-7 at every step."""
    diff = torch.sqrt(sum(((got[n].double() - w.double()) ** 2).sum() for n, w in want.items()))
    return float(diff / max(_norm(want), floor))


@pytest.mark.parametrize("family", ["bert", *(pytest.param(f, marks=pytest.mark.slow)
                                              for f in ("roberta", "albert", "distilbert", "gpt2"))])
def test_each_fused_run_trains_as_its_solo_twin(family):
    """fp64: the fused computation is the solo one (1e-9 over 24 AdamW steps). fp32: losses, gradients and final
    weights within 1e-5 relative at every step (gradients against the run's typical gradient norm, :func:`_whole`);
    measured over the five families: at most 1.8e-7 losses, 6.3e-8 weights, 3.5e-7 gradients."""
    exact = _fused_and_solo(family, torch.float64)
    assert max(exact.values()) <= 1e-9, exact
    fp32 = _fused_and_solo(family, torch.float32)
    assert max(fp32.values()) <= TOL, fp32


def test_runs_that_differ_in_learning_rate_and_weight_decay_fuse_and_each_trains_as_its_solo_twin():
    """A swept learning rate or weight decay is a per-run scalar of the stacked AdamW: such runs of one cell fuse
    (:func:`fused.cell_key` leaves them out), and each gives its solo twin's losses, gradients and weights."""
    from harness.specs import FinetuneSpec

    runs = [FinetuneSpec("tiny:bert", "rte", 0, learning_rate=lr, weight_decay=wd)
            for lr, wd in ((2e-5, 0.01), (5e-5, 0.01), (2e-5, 0.1))]
    assert [len(g) for g in fused.fuse_groups(runs, 3)] == [3]
    assert [len(g) for g in fused.fuse_groups([*runs, FinetuneSpec("tiny:bert", "rte", 0, epochs=1)], 4)] == [3, 1]
    errors = _fused_and_solo("bert", torch.float32, seeds=(0, 1), lrs=[1e-4, 4e-4], wds=[0.01, 0.2])
    assert max(errors.values()) <= TOL, errors


def _stack(family, seeds, dropout=False):
    from transformers import Trainer

    models, tok = _models(family, seeds, dropout=dropout)
    stack = fused.StackedRuns(models, learning_rates=[LR] * len(seeds), weight_decays=[0.01] * len(seeds),
                              regression=False, decay=set(Trainer.get_decay_parameter_names(None, models[0])))
    return stack, models, tok


def test_dropout_on_fused_runs_are_reproducible_and_draw_their_own_masks():
    runs = []
    for _ in range(2):
        stack, _, tok = _stack("bert", (0, 0), dropout=True)  # twice the same seed: only dropout tells them apart
        out = fused.train_group(stack, [_rows(tok)] * 2, (0, 0), batch_size=BATCH, total_steps=6, warmup=0,
                                pad_id=tok.pad_token_id, causal=False, dropout_seed=7)
        runs.append(out["losses"])
    assert runs[0] == runs[1]  # the same group, the same draws
    assert all(step[0] != step[1] for step in runs[0])  # each run its own masks


def test_a_diverged_run_stops_alone_and_the_others_train_on_as_before():
    seeds = (0, 1, 2)
    clean, _, tok = _stack("bert", seeds)
    rows = _rows(tok)
    kwargs = {"batch_size": BATCH, "total_steps": 8, "warmup": 0, "pad_id": tok.pad_token_id, "causal": False}
    fused.train_group(clean, [rows] * 3, seeds, **kwargs)
    faulty, _, _ = _stack("bert", seeds)

    def poison(step, batch, losses):
        if step == 3:  # run 1's weights turn to NaN after its third step
            faulty.params["classifier.weight"][1] = float("nan")

    out = fused.train_group(faulty, [rows] * 3, seeds, on_step=poison, **kwargs)
    assert out["stopped"] == {1: 4}
    assert all(math.isnan(step[1]) for step in out["losses"][3:])
    for k in (0, 2):
        assert _whole(faulty.state_dict(k), clean.state_dict(k)) == 0.0
    assert int(faulty.steps[1]) == 3 and int(faulty.steps[0]) == 8


def test_a_groups_energy_splits_by_computed_tokens_and_sums_exactly_to_the_reading():
    reading = {"energy_kwh": 0.123456789, "gpu_hours": 0.3, "co2_kg": 0.05, "duration_s": 100.0,
               "breakdown": {"cpu_kwh": 0.1, "ram_kwh": 0.003456789, "gpu_kwh": 0.02}}
    tokens = {"a": 1000, "b": 1000, "c": 1000}
    split = fused.split_efficiency(reading, tokens, "fused-x")
    for key in ("energy_kwh", "gpu_hours", "co2_kg"):
        units = [round(split[r][key] * 3_600_000_000) for r in tokens]
        assert sum(units) == round(reading[key] * 3_600_000_000), key  # whole millijoules (or equivalents)
        # the reading to its unit (the NVML counter's): within one millijoule
        assert math.isclose(math.fsum(split[r][key] for r in tokens), reading[key], abs_tol=1 / 3_600_000_000)
        assert max(units) - min(units) <= 1  # equal tokens, equal shares (to a unit)
    assert all(split[r]["duration_s"] == 100.0 for r in tokens)  # the runs ran together
    assert split["a"]["fused_attribution"] == {
        "method": fused.SPLIT_METHOD, "group": "fused-x", "runs": 3, "computed_tokens": 1000,
        "group_computed_tokens": 3000, "share": 1 / 3, "group_energy_kwh": 0.123456789, "group_gpu_hours": 0.3}
    uneven = fused.split_efficiency(reading, {"a": 1, "b": 3}, "g")
    assert round(uneven["b"]["energy_kwh"] * 3_600_000_000) == round(0.75 * 0.123456789 * 3_600_000_000)


def test_deberta_is_refused_with_the_reason():
    with pytest.raises(UserError, match="nonzero"):
        fused.check_fusable("deberta")
    from harness.specs import FinetuneSpec

    runs = [FinetuneSpec("tiny:deberta", "rte", s) for s in range(2)]
    assert fused.fuse_groups(runs, 5) == [[runs[0]], [runs[1]]]  # they train alone


def test_only_runs_of_one_cell_that_can_fuse_are_grouped():
    """Seeds of one cell, K at a time; another recipe (epochs) is another cell; an explicit mixed precision,
    length-grouped batches or a flattened layout train alone."""
    from harness.specs import FinetuneSpec

    cell = [FinetuneSpec("tiny:bert", "rte", s) for s in range(5)]
    other = [FinetuneSpec("tiny:bert", "rte", s, epochs=1) for s in range(2)]
    alone = [FinetuneSpec("tiny:bert", "rte", 0, precision="bf16"), FinetuneSpec("tiny:bert", "rte", 0, group_by_length=True),
             FinetuneSpec("tiny:bert", "rte", 0, padding="flatten")]
    groups = fused.fuse_groups([*cell, *other, *alone], 3)
    assert groups == [cell[:3], cell[3:], other, *([a] for a in alone)]
    assert fused.group_id(cell[:3]) != fused.group_id(cell[3:])


# ---------------------------------------------------------------------- a group's runs end to end (records)
def _group_specs(seeds=(0, 1, 2), **hyper):
    from harness.specs import FinetuneSpec

    hp = {"max_train_samples": 16, "max_eval_samples": 8, "batch_size": 4, "epochs": 2, **hyper}
    return [FinetuneSpec("tiny:bert", "rte", s, **hp) for s in seeds]


def _bodies(out, specs):
    """Each stored record's result: status, metrics, history and training loss (what a run means)."""
    from harness.store import RunStore

    store = RunStore(out)
    return {s.run_id(): {k: store.get(s.run_id()).get(k) for k in ("status", "metrics", "history", "train")}
            for s in specs}


def _strip_times(bodies):
    for body in bodies.values():
        for row in body["history"] or []:
            row.pop("eval_runtime_s", None)
    return bodies


def test_a_fault_in_one_fused_run_leaves_the_others_records_as_without_it(data_root, tmp_path):
    specs = _group_specs()
    fused.run_group(specs, tmp_path / "clean", data_root=data_root, track_efficiency=False)
    clean = _strip_times(_bodies(tmp_path / "clean", specs))

    def poison(step, batch, losses):
        if step == 2:
            stack_of[0].params["classifier.weight"][1] = float("nan")

    stack_of = []
    original = fused.StackedRuns.__init__

    def keep(self, *args, **kwargs):
        original(self, *args, **kwargs)
        stack_of.append(self)

    fused.StackedRuns.__init__ = keep
    try:
        fused.run_group(specs, tmp_path / "faulty", data_root=data_root, track_efficiency=False, on_step=poison)
    finally:
        fused.StackedRuns.__init__ = original
    faulty = _strip_times(_bodies(tmp_path / "faulty", specs))
    ids = [s.run_id() for s in specs]
    assert faulty[ids[1]]["status"] == "failed"
    from harness.store import RunStore

    assert "stopped alone at step 3" in RunStore(tmp_path / "faulty").get(ids[1])["error"]
    for rid in (ids[0], ids[2]):
        assert faulty[rid] == clean[rid]
    records = RunStore(tmp_path / "clean")
    assert {records.get(r)["settings"]["fused"]["group"] for r in ids} == {fused.group_id(specs)}


@pytest.mark.slow
def test_a_group_killed_with_sigkill_resumes_each_run_from_its_own_checkpoint(data_root, tmp_path):
    """kill -9 of the group's process mid-epoch (no handler runs): each run's checkpoint of the epoch before is
    whole, no record is written, and the next run_group resumes every run from it to the records of a group
    never killed."""
    import signal
    import subprocess
    import sys
    from pathlib import Path

    from hang_bound import HANG_S

    specs = _group_specs()
    fused.run_group(specs, tmp_path / "whole", data_root=data_root, track_efficiency=False)
    whole = _strip_times(_bodies(tmp_path / "whole", specs))
    child = (
        "import os, signal, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from pathlib import Path\n"
        "from harness.finetune import fused\n"
        "from test_fused import _group_specs\n"
        "def kill(step, batch, losses):\n"
        "    if step == 6:  # after the first epoch's checkpoints (step 4), before the second's\n"
        "        os.kill(os.getpid(), signal.SIGKILL)\n"
        f"fused.run_group(_group_specs(), Path({str(tmp_path / 'cut')!r}), data_root=Path({str(data_root)!r}), "
        "track_efficiency=False, on_step=kill)\n")
    proc = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True, timeout=HANG_S,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    from harness.store import RunStore

    store = RunStore(tmp_path / "cut")
    for spec in specs:  # each run has its own whole checkpoint of the first epoch, and no record yet
        assert (store.checkpoint_dir(spec.run_id()) / "checkpoint-4" / fused.STATE_FILE).is_file()
        assert store.get(spec.run_id()) is None or store.get(spec.run_id()).get("status") != "ok"
    fused.run_group(specs, tmp_path / "cut", data_root=data_root, track_efficiency=False)
    resumed = _strip_times(_bodies(tmp_path / "cut", specs))
    assert all(store.get(s.run_id())["resumed_from"] == 4 for s in specs)
    assert resumed == whole


@pytest.mark.slow
def test_vnr_run_with_fuse_writes_the_records_it_writes_unfused(data_root, tmp_path, capsys):
    """The same run ids, statuses and metrics (dropout draws differ between layouts: training losses within
    2 %, as two padding layouts of one run are)."""
    import yaml

    from harness.cli import main
    from harness.store import RunStore

    hyper = {"max_train_samples": 16, "max_eval_samples": 8, "batch_size": 4, "epochs": 1}
    records = {}
    for name, flags in (("alone", []), ("fused", ["--fuse", "5"])):
        config = tmp_path / f"{name}.yaml"
        config.write_text(yaml.safe_dump({"name": name, "output": str(tmp_path / name), "finetune": {
            "models": ["tiny:bert"], "tasks": ["rte"], "seeds": {"from": 0, "to": 4}, "hyperparameters": hyper,
            "run_options": {"track_efficiency": False}}}))
        assert main(["run", str(config), "--no-progress", "--data-root", str(data_root), *flags]) == 0
        store = RunStore(tmp_path / name)
        records[name] = {p.stem: store.get(p.stem) for p in (tmp_path / name / "runs").glob("*.json")}
    alone, fused_records = records["alone"], records["fused"]
    assert sorted(alone) == sorted(fused_records) and len(alone) == 5
    groups = {r["settings"]["fused"]["group"] for r in fused_records.values()}
    assert len(groups) == 1 and all("fused" not in r["settings"] for r in alone.values())
    for rid, solo in alone.items():
        together = fused_records[rid]
        assert solo["status"] == together["status"] == "ok"
        assert solo["metrics"].keys() == together["metrics"].keys()
        assert math.isclose(solo["train"]["train_loss"], together["train"]["train_loss"], rel_tol=0.02)
        assert solo["train"]["global_step"] == together["train"]["global_step"]


def test_a_calibration_burst_of_a_fused_group_times_its_windows_and_stops_at_the_deadline(data_root):
    import time

    from harness.specs import FinetuneSpec

    spec = FinetuneSpec("tiny:bert", "rte", 0, batch_size=4, max_length=32)
    row = fused.measure_fused_burst(spec, 2, warmup=1, steps=1, windows=2, data_root=data_root)
    assert row["status"] == "measured" and row["fuse"] == 2 and len(row["window_samples_s"]) == 2
    assert row["samples_s"] == sorted(row["window_samples_s"])[0] + (
        sorted(row["window_samples_s"])[1] - sorted(row["window_samples_s"])[0]) / 2 > 0  # the median of two
    cut = fused.measure_fused_burst(spec, 2, warmup=1, steps=1, windows=2, data_root=data_root,
                                    deadline=time.time())
    assert cut["status"] == "cut" and cut["samples_s"] is None and cut["reason"].endswith("discarded")


# ---------------------------------------------------------------------- the captured step
def _captured_and_eager(family, steps=20, n=22, dropout=False, seeds=(0, 1)):
    """(captured group, eager group, their train_group outcomes): the same runs, ``n`` examples (a last batch of
    2 filled to 4 with padding rows), the captured one through static shapes and one compiled whole step."""
    outs = []
    for capture in (True, False):
        stack, _, tok = _stack(family, seeds, dropout=dropout)
        out = fused.train_group(stack, [_rows(tok)[:n]] * len(seeds), seeds, batch_size=BATCH, total_steps=steps,
                                warmup=2, pad_id=tok.pad_token_id, causal=family in fused.LAST_TOKEN,
                                dropout_seed=3, capture=capture)
        outs.append((stack, out))
    return outs


@pytest.mark.parametrize("family", ["bert", pytest.param("gpt2", marks=pytest.mark.slow)])
def test_the_captured_step_trains_as_the_eager_step(family):
    """The whole step (losses, gradients, norms, the non-finite check, AdamW) compiled into one graph over
    static-shape batches (fixed widths, the last partial batch filled with weight-0 rows) gives the eager
    step's losses and weights within 1e-5 relative over 20 steps (fp32, dropout off)."""
    from torch._dynamo.utils import counters

    counters.clear()
    widths = []
    original = fused.StackedRuns.captured_step

    def seen(self, batch, lr_factor):
        widths.append(tuple(batch["input_ids"].shape))
        return original(self, batch, lr_factor)

    fused.StackedRuns.captured_step = seen
    try:
        (captured, got), (eager, want) = _captured_and_eager(family)
    finally:
        fused.StackedRuns.captured_step = original
    # every batch of one static size (the last partial one filled), one graph per width, never one per step
    assert len(widths) == 20 and {w[1] for w in widths} == {BATCH}
    assert counters["stats"]["unique_graphs"] == len(set(widths)) <= fused.MAX_WIDTHS
    assert got["stopped"] == want["stopped"] == {}
    for a, b in zip(got["losses"], want["losses"]):
        assert a == pytest.approx(b, rel=TOL)
    for k in range(2):
        assert _whole(captured.state_dict(k), eager.state_dict(k)) <= TOL
        assert int(captured.steps[k]) == int(eager.steps[k]) == 20
    for name in ("exp_avg", "exp_avg_sq"):
        assert _whole(getattr(captured, name), getattr(eager, name)) <= TOL


def test_a_run_diverging_inside_the_captured_step_stops_alone():
    seeds = (0, 1, 2)
    stack, _, tok = _stack("bert", seeds)
    rows = _rows(tok)

    def poison(step, batch, losses):
        if step == 3:
            stack.params["classifier.weight"][1] = float("nan")

    out = fused.train_group(stack, [rows] * 3, seeds, batch_size=BATCH, total_steps=8, warmup=0,
                            pad_id=tok.pad_token_id, causal=False, on_step=poison, capture=True)
    assert out["stopped"] == {1: 4}
    assert [int(s) for s in stack.steps] == [8, 3, 8]
    assert all(math.isfinite(step[0]) and math.isfinite(step[2]) for step in out["losses"])


def test_vnr_run_with_fuse_and_capture_on_writes_the_runs_and_says_how_they_trained(data_root, tmp_path):
    """``--fuse 2 --capture on``: the same run ids and steps as eager fused runs, training losses within 2 %
    (dropout draws differ between a captured and an eager step), each record naming its captured step."""
    import yaml

    from harness.cli import main
    from harness.store import RunStore

    hyper = {"max_train_samples": 10, "max_eval_samples": 8, "batch_size": 4, "epochs": 1}
    records = {}
    for name, flags in (("eager", []), ("captured", ["--capture", "on"])):
        config = tmp_path / f"{name}.yaml"
        config.write_text(yaml.safe_dump({"name": name, "output": str(tmp_path / name), "finetune": {
            "models": ["tiny:bert"], "tasks": ["rte"], "seeds": [0, 1], "hyperparameters": hyper,
            "run_options": {"track_efficiency": False}}}))
        assert main(["run", str(config), "--no-progress", "--data-root", str(data_root), "--fuse", "2",
                     *flags]) == 0
        store = RunStore(tmp_path / name)
        records[name] = {p.stem: store.get(p.stem) for p in (tmp_path / name / "runs").glob("*.json")}
    assert sorted(records["eager"]) == sorted(records["captured"]) and len(records["eager"]) == 2
    for rid, eager in records["eager"].items():
        captured = records["captured"][rid]
        assert eager["status"] == captured["status"] == "ok"
        assert eager["train"]["global_step"] == captured["train"]["global_step"] == 3  # 10 examples: 4, 4, 2
        assert math.isclose(eager["train"]["train_loss"], captured["train"]["train_loss"], rel_tol=0.02)
        assert eager["settings"]["fused"]["capture"] == {"mode": "eager"}
        assert captured["settings"]["fused"]["capture"] == {"mode": "captured", "chosen_by": "the capture setting",
                                                            "how": {"backend": "aot_eager"}}
        assert captured["settings"]["batching"]["mode"] == "static"


def test_capture_on_without_fusion_is_refused_in_one_line(tmp_path, capsys):
    from harness.cli import main

    config = tmp_path / "g.yaml"
    config.write_text(f"name: g\noutput: {tmp_path / 'out'}\nfinetune:\n  models: [tiny:bert]\n  tasks: [rte]\n"
                      "  seeds: [0, 1]\n")
    assert main(["run", str(config), "--fuse", "off", "--capture", "on", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err == ("vnr run: error: local.capture: on captures a fused group's step, and fuse is off: give fuse K (2 "
                   "or more) or auto, or leave capture out\n")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_groups_captured_one_after_another_each_compile_their_own_graphs():
    """A grid trains its fused groups one after another in one process: each group's captured step compiles
    its own graphs (one per width) instead of adding them to the groups before it until dynamo's recompile limit
    (8; 2 here, so that three small groups reach it) makes it fall back to eager without a word."""
    import torch._dynamo.config

    with torch._dynamo.config.patch(recompile_limit=2):  # torch's own patch: restored whole afterwards
        _three_groups_one_after_another()


def _three_groups_one_after_another():
    from torch._dynamo.utils import counters

    for group in range(3):
        stack, _, tok = _stack("bert", (group, group + 1))
        counters.clear()
        widths = set()
        original = stack.captured_step

        def seen(batch, lr_factor, original=original, widths=widths):
            widths.add(tuple(batch["input_ids"].shape))
            return original(batch, lr_factor)

        stack.captured_step = seen
        fused.train_group(stack, [_rows(tok)] * 2, (group, group + 1), batch_size=BATCH, total_steps=3, warmup=0,
                          pad_id=tok.pad_token_id, causal=False, capture=True)
        assert widths and counters["stats"]["unique_graphs"] == len(widths) <= 2, group


@pytest.mark.parametrize("types, regression, causal", [(True, False, False), (False, True, True)])
def test_batches_gathered_from_padded_rows_are_the_batches_built_example_by_example(types, regression, causal):
    """PaddedRows.batch (the training loop's gather) against stack_batches (the straightforward loop): the same
    tensors for random picks, with and without static widths and sizes (padding rows), token types, float labels."""
    import random

    rng = random.Random(0)
    rows = []
    for i in range(40):
        n = rng.randint(1, 30)
        ex = {"input_ids": [rng.randint(1, 99) for _ in range(n)], "label": float(i) / 7 if regression else i % 3}
        if types:
            ex["token_type_ids"] = [int(j > n // 2) for j in range(n)]
        rows.append(ex)
    source = fused.PaddedRows(rows, pad_id=0)
    for trial in range(30):
        k = rng.randint(1, 4)
        picks = [[rng.randrange(40) for _ in range(rng.randint(1, 6))] for _ in range(k)]
        static = {"width": 32, "size": 6} if trial % 2 else {}
        want = fused.stack_batches([[rows[i] for i in p] for p in picks], 0, causal=causal, **static)
        got = source.batch(picks, causal=causal, **static)
        assert set(got) == set(want)
        for key in want:
            assert got[key].dtype == want[key].dtype and torch.equal(got[key], want[key]), (trial, key)
