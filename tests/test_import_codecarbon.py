"""The codecarbon importer on the structures of real ``emissions.csv`` files of 2.x and 3.x (issue #27).

The fixtures copy the STRUCTURE of real files (written here, never copied): the 2.x header without
``experiment_id`` (``codecarbon_version`` 2.3), the 3.x header with ``experiment_id``, ``water_consumed``,
utilisation columns and ``wue``; codecarbon's default project name ``codecarbon`` kept by two
projects; a 3.x run flushed three times, each row holding the run's running totals; a row cut short and
a row with a value that is no number (what an interrupted tracker leaves).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import ranking
from harness.cli import main
from ranking.floor.errors import UserError
from ranking.importers import codecarbon
from ranking.importers.common import Options

V2 = ["timestamp", "project_name", "run_id", "duration", "emissions", "emissions_rate", "cpu_power", "gpu_power",
      "ram_power", "cpu_energy", "gpu_energy", "ram_energy", "energy_consumed", "country_name", "country_iso_code",
      "region", "cloud_provider", "cloud_region", "os", "python_version", "codecarbon_version", "cpu_count",
      "cpu_model", "gpu_count", "gpu_model", "longitude", "latitude", "ram_total_size", "tracking_mode", "on_cloud",
      "pue"]
V3 = ["timestamp", "project_name", "run_id", "experiment_id", "duration", "emissions", "emissions_rate", "cpu_power",
      "gpu_power", "ram_power", "cpu_energy", "gpu_energy", "ram_energy", "energy_consumed", "water_consumed",
      "country_name", "country_iso_code", "region", "cloud_provider", "cloud_region", "os", "python_version",
      "codecarbon_version", "cpu_count", "cpu_model", "gpu_count", "gpu_model", "longitude", "latitude",
      "ram_total_size", "tracking_mode", "cpu_utilization_percent", "gpu_utilization_percent",
      "ram_utilization_percent", "ram_used_gb", "on_cloud", "pue", "wue"]
EXPERIMENT = "5b0fa12a-3dd7-45bb-9766-cc326314d9f1"  # the experiment id codecarbon writes when none is given


def row(header: list[str], project: str, run: str, when: str, duration: float, emissions: float,
        energy: float) -> dict:
    out = {c: "" for c in header}
    out.update({"timestamp": when, "project_name": project, "run_id": run, "duration": duration,
                "emissions": emissions, "energy_consumed": energy, "emissions_rate": emissions / duration,
                "cpu_power": 42.5, "gpu_power": 0.0, "ram_power": 6.0, "country_name": "Spain",
                "country_iso_code": "ESP", "region": "madrid", "os": "Linux-6.5", "python_version": "3.11.9",
                "codecarbon_version": "3.0.1" if "experiment_id" in header else "2.3.4", "cpu_count": 10,
                "cpu_model": "AMD EPYC 7643", "gpu_count": 1, "gpu_model": "1 x NVIDIA RTX A5000",
                "longitude": -3.7, "latitude": 40.4, "ram_total_size": 24.0, "tracking_mode": "machine",
                "on_cloud": "N", "pue": 1.0})
    if "experiment_id" in header:
        out.update({"experiment_id": EXPERIMENT, "water_consumed": 0.0, "wue": 0.0})
    return out


def write(path: Path, header: list[str], rows: list[dict], extra: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header)
        w.writeheader()
        w.writerows(rows)
        fh.write(extra)
    return path


def read(paths: list[Path], notes: list[str] | None = None, **options: object):
    return codecarbon.read(paths, Options(sink=(notes if notes is not None else []).append, **options))


def test_a_2x_file_without_experiment_id_reads(tmp_path):
    path = write(tmp_path / "emissions.csv", V2, [row(V2, "glue-bert", "r1", "2024-04-13T21:30:53", 100.0, 0.01, 0.05),
                                                  row(V2, "glue-bert", "r2", "2024-04-13T22:30:53", 50.0, 0.005, 0.02)])
    table = read([path])
    assert table.models == ("glue-bert",)
    np.testing.assert_allclose(table.values, [[0.07, 0.015, 150.0]])
    with pytest.raises(UserError, match=r"no column 'experiment_id' \(a codecarbon 2.x file has no experiment_id: "
                                        r"pass --by project_name, --by run_id or --by file\)"):
        read([path], codecarbon_key="experiment_id")


def test_the_default_project_name_in_two_files_is_never_silently_one_model(tmp_path, capsys):
    a = write(tmp_path / "bert" / "emissions.csv", V3, [row(V3, "codecarbon", "r1", "2025-10-09T11:25:18",
                                                             116.1, 0.0022, 0.011)])
    b = write(tmp_path / "distilbert" / "emissions.csv", V2, [row(V2, "codecarbon", "r2", "2025-10-09T12:25:18",
                                                                  58.0, 0.0011, 0.005)])
    with pytest.raises(UserError) as err:
        read([a, b])
    assert str(err.value).startswith("project name 'codecarbon' (codecarbon's default, kept by every tracker not "
                                     "given one) is in 2 files (") and "pass --by file" in str(err.value)
    by_file = read([a, b], codecarbon_key="file")
    assert by_file.models == ("bert", "distilbert")
    np.testing.assert_allclose(by_file.values[:, 0], [0.011, 0.005])
    assert read([a, b], codecarbon_key="run_id").models == ("r1", "r2")
    notes: list[str] = []
    one = read([a, b], notes, codecarbon_map={"codecarbon": "org/m"})  # said so: one model
    assert one.models == ("org/m",) and any("summed runs from several files as one model" in n for n in notes)
    code = main(["import", "codecarbon", str(a.parent), str(b.parent), "-o", str(tmp_path / "res"), "--by", "file"])
    assert code == 0, capsys.readouterr().err
    assert ranking.load_table(tmp_path / "res").models == ("bert", "distilbert")


def test_the_default_project_with_several_runs_in_one_file_is_named(tmp_path):
    path = write(tmp_path / "emissions.csv", V3, [row(V3, "codecarbon", "r1", "2025-10-09T11:25:18", 10.0, 0.1, 1.0),
                                                  row(V3, "codecarbon", "r2", "2025-10-09T12:25:18", 20.0, 0.2, 2.0)])
    notes: list[str] = []
    assert read([path], notes).models == ("codecarbon",)
    assert any("'codecarbon' is codecarbon's default name; its 2 runs" in n and "--by run_id splits them" in n
               for n in notes)


def test_a_run_flushed_several_times_counts_once(tmp_path):
    """Each flush writes the run's running totals (duration 6.1 → 9.1 → 12.1): its last row is the run."""
    path = write(tmp_path / "emissions.csv", V3, [
        row(V3, "realrun", "3b54", "2026-08-12T19:37:29", 6.111706958006835, 4.3679212303523465e-06, 2.5e-05),
        row(V3, "realrun", "3b54", "2026-08-12T19:37:32", 9.119719916001486, 1.1022370326871737e-05, 3.8e-05),
        row(V3, "realrun", "3b54", "2026-08-12T19:37:35", 12.128133875005005, 1.3327795140966287e-05, 5.1e-05),
        row(V3, "realrun", "older", "2026-08-12T19:30:00", 100.0, 1e-04, 4e-04),
    ])
    notes: list[str] = []
    table = read([path], notes)
    np.testing.assert_allclose(table.values, [[5.1e-05 + 4e-04, 1.3327795140966287e-05 + 1e-04,
                                               12.128133875005005 + 100.0]])
    assert any(n.startswith("codecarbon: 2 earlier row(s) of runs written several times left out") for n in notes)


def test_rows_of_one_run_that_do_not_grow_are_summed_with_a_note(tmp_path):
    path = write(tmp_path / "emissions.csv", V3, [row(V3, "p", "r", "2026-01-01T00:00:00", 10.0, 0.2, 2.0),
                                                  row(V3, "p", "r", "2026-01-01T01:00:00", 5.0, 0.1, 1.0)])
    notes: list[str] = []
    np.testing.assert_allclose(read([path], notes).values, [[3.0, 0.3, 15.0]])
    assert any("do not grow" in n for n in notes)


@pytest.mark.parametrize("column, name", [("energy_consumed", "energy_kwh"), ("duration", "duration_s"),
                                          ("emissions", "emissions_kg")])
def test_negative_values_are_refused_or_missing(tmp_path, column, name):
    bad = row(V3, "a", "r1", "2025-10-09T11:25:18", 10.0, 0.1, 1.0)
    bad[column] = -1.0
    path = write(tmp_path / "emissions.csv", V3, [bad, row(V3, "b", "r2", "2025-10-09T11:25:18", 10.0, 0.1, 1.0)])
    with pytest.raises(UserError, match=rf"line 2, project_name 'a', {column} is -1, outside its range \[0, ∞\)"):
        read([path])
    notes: list[str] = []
    table = read([path], notes, out_of_range="missing")
    j = table.names.index(name)
    assert np.isnan(table.values[0, j]) and table.values[1, j] > 0
    assert any(f"left missing {name} of a" in n for n in notes)


def test_corrupt_rows_are_refused_or_skipped_and_counted(tmp_path, capsys):
    good = [row(V3, "a", "r1", "2025-10-09T11:25:18", 10.0, 0.1, 1.0),
            row(V3, "b", "r2", "2025-10-09T11:26:18", 20.0, 0.2, 2.0)]
    cut = "2025-10-09T11:27:18,a,r3,5b0f,10.0\n"  # an interrupted write
    path = write(tmp_path / "emissions.csv", V3, good, extra=cut)
    with open(path, "a", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=V3)
        w.writerow(row(V3, "b", "r4", "2025-10-09T11:28:18", 10.0, 0.1, 1.0) | {"energy_consumed": "nan kWh"})
    with pytest.raises(UserError, match=r"line 4 has 5 field\(s\), the header 38: .*--skip-bad-rows"):
        read([path])
    notes: list[str] = []
    table = read([path], notes, skip_bad_rows=True)
    np.testing.assert_allclose(table.values, [[1.0, 0.1, 10.0], [2.0, 0.2, 20.0]])
    skipped = [n for n in notes if n.startswith("codecarbon: skipped")]
    assert skipped == [f"codecarbon: skipped 2 corrupt row(s) (--skip-bad-rows): {path} line 4 (5 fields); {path} "
                       "line 5 (energy_consumed 'nan kWh')"]
    code = main(["import", "codecarbon", str(path), "-o", str(tmp_path / "res"), "--skip-bad-rows"])
    assert code == 0, capsys.readouterr().err


def test_task_rows_are_each_one_measurement(tmp_path):
    header = ["task_name", *V3]
    rows = [row(V3, "p", "r", "2026-01-01T00:00:00", 10.0, 0.1, 1.0) | {"task_name": "train"},
            row(V3, "p", "r", "2026-01-01T00:10:00", 5.0, 0.05, 0.5) | {"task_name": "eval"}]
    np.testing.assert_allclose(read([write(tmp_path / "emissions.csv", header, rows)]).values, [[1.5, 0.15, 15.0]])


def test_each_cost_is_its_own_benchmark(tmp_path):
    path = write(tmp_path / "emissions.csv", V3, [row(V3, "a", "r1", "2025-10-09T11:25:18", 10.0, 0.1, 1.0)])
    crit = read([path]).criteria[0]
    assert (crit.name, crit.benchmark, crit.metric, crit.range, crit.direction) == (
        "energy_kwh", "energy_kwh", "energy_consumed", (0.0, None), "lower")


SAMPLES = Path(__file__).resolve().parents[1] / "configs" / "import_samples" / "codecarbon"


def test_the_readme_example_imports_the_shipped_samples_and_ranks(tmp_path, capsys):
    out = tmp_path / "results" / "imported" / "codecarbon"
    code = main(["import", "codecarbon", str(SAMPLES / "bert-base"), str(SAMPLES / "distilbert"), "-o", str(out),
                 "--by", "file"])
    _, err = capsys.readouterr()
    assert code == 0, err
    table = ranking.load_table(out)
    assert table.models == ("bert-base", "distilbert")
    np.testing.assert_allclose(table.values[:, table.names.index("duration_s")], [1812.4 + 905.0, 1207.9])
    assert main(["rank", str(out)]) == 0
    assert "distilbert" in capsys.readouterr().out


# ---------------------------------------------------------------------- issues 36 and 38
#: codecarbon 1.x (2021): no run_id, an experiment_id per tracker (per run), no power or hardware columns
V1 = ["timestamp", "experiment_id", "project_name", "duration", "emissions", "energy_consumed", "country_name",
      "country_iso_code", "region", "on_cloud", "cloud_provider", "cloud_region"]


def row_1x(run: str, when: str, duration: float, emissions: float, energy: float) -> dict:
    return {"timestamp": when, "experiment_id": run, "project_name": "codecarbon", "duration": duration,
            "emissions": emissions, "energy_consumed": energy, "country_name": "France", "country_iso_code": "FRA",
            "region": "", "on_cloud": "N", "cloud_provider": "", "cloud_region": ""}


def test_a_codecarbon_1x_file_is_read_by_run_id_through_its_experiment_id(tmp_path):
    runs = ("3d0c0253-711f-482e-b2fa-cf009acb467c", "9b1e7c55-0a3e-4a57-8d3e-52c1b0f1e2aa")
    path = write(tmp_path / "emissions.csv", V1, [row_1x(runs[0], "2021-06-29T10:00:00", 100.0, 0.01, 0.05),
                                                  row_1x(runs[1], "2021-06-29T11:00:00", 50.0, 0.005, 0.02)])
    notes: list[str] = []
    table = read([path], notes, codecarbon_key="run_id")
    assert table.models == runs
    np.testing.assert_allclose(table.values, [[0.05, 0.01, 100.0], [0.02, 0.005, 50.0]])
    assert any("codecarbon 1.x" in n and "experiment_id" in n for n in notes)


def test_one_file_given_twice_counts_once(tmp_path, capsys):
    path = write(tmp_path / "bert" / "emissions.csv", V2,
                 [row(V2, "glue-bert", "r1", "2024-04-13T21:30:53", 100.0, 0.01, 0.05)])
    for key in ("file", "project_name", "run_id"):
        notes: list[str] = []
        table = read([path, path, tmp_path / "bert"], notes, codecarbon_key=key)
        np.testing.assert_allclose(table.values, [[0.05, 0.01, 100.0]])
        assert any("given more than once: read once" in n for n in notes)
