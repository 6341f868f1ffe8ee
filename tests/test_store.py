"""Run store: stable run ids, atomic writes, done/failed semantics, concurrent writers."""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import time

from harness.specs import BiasSpec, FinetuneSpec
from harness.store import RunStore, atomic_write_bytes, run_id


def test_run_id_is_stable_and_sensitive_to_every_hyperparameter():
    a = FinetuneSpec("bert-base-uncased", "rte", 0)
    assert a.run_id() == FinetuneSpec("bert-base-uncased", "rte", 0).run_id()
    assert a.run_id().startswith("finetune-bert_base_uncased-rte-s0-")
    changed = {
        FinetuneSpec("bert-base-uncased", "rte", 1).run_id(),
        FinetuneSpec("bert-base-uncased", "rte", 0, learning_rate=3e-5).run_id(),
        FinetuneSpec("bert-base-uncased", "rte", 0, max_steps=10).run_id(),
        FinetuneSpec("bert-base-uncased", "mrpc", 0).run_id(),
    }
    assert a.run_id() not in changed and len(changed) == 4
    # spellings of the same task or model are the same run
    assert FinetuneSpec("deberta-base", "RTE", 0).run_id() == FinetuneSpec("microsoft/deberta-base", "rte", 0).run_id()
    assert BiasSpec("gpt2", "crows_pairs").run_id() != BiasSpec("gpt2", "crows_pairs", limit=10).run_id()
    # key order does not matter
    assert run_id({"kind": "x", "a": 1, "b": 2}) == run_id({"b": 2, "a": 1, "kind": "x"})


def test_done_only_when_ok(tmp_path):
    store = RunStore(tmp_path)
    rid = "finetune-x-1"
    assert not store.is_done(rid) and store.get(rid) is None
    store.write({"run_id": rid, "status": "failed", "error": "boom"})
    assert not store.is_done(rid) and store.get(rid)["error"] == "boom"
    store.write({"run_id": rid, "status": "ok"})
    assert store.is_done(rid)
    assert [r["run_id"] for r in store.records()] == [rid]
    assert not list(store.runs_dir.glob(".*.tmp"))


def _writer(root, i):
    store = RunStore(root)
    for k in range(20):
        store.write({"run_id": f"r{i}-{k}", "status": "ok", "payload": "x" * 10_000})


def test_concurrent_writers_lose_nothing(tmp_path):
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(tmp_path, i)) for i in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join()
    recs = list(RunStore(tmp_path).records())
    assert len(recs) == 80 and all(len(r["payload"]) == 10_000 for r in recs)


def test_killed_mid_write_leaves_old_file_or_nothing(tmp_path):
    target = tmp_path / "r.json"
    target.write_text(json.dumps({"status": "ok", "v": 1}))
    code = (
        "from harness.store import atomic_write_bytes\n"
        "import os, time\n"
        "orig = os.fsync\n"
        "def slow(fd):\n"
        "    print('writing', flush=True); time.sleep(30); orig(fd)\n"
        "os.fsync = slow\n"
        f"atomic_write_bytes({str(target)!r}, b'{{\"status\": \"ok\", \"v\": 2}}')\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "writing"  # the new bytes are written, not yet renamed
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert json.loads(target.read_text()) == {"status": "ok", "v": 1}
    time.sleep(0.05)
    atomic_write_bytes(target, b"{}")
    assert target.read_text() == "{}"
