"""Small collected-results folders for the scenario tests (matrix.csv + criteria.yaml [+ seeds.csv])."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import yaml

REPO = Path(__file__).resolve().parents[1]
PAPER = REPO / "configs" / "scenarios" / "paper_case_study.yaml"
USER = REPO / "configs" / "scenarios" / "user_weighted.yaml"

MODELS = ["A", "B", "C", "D", "E"]
CRITERIA = {
    # name: (group, direction, per-model values A..E)
    "t1_acc": ("performance", "higher", [90.0, 85.0, 80.0, 70.0, 60.0]),
    "t2_acc": ("performance", "higher", [88.0, 86.0, 70.0, 75.0, 65.0]),
    "t2_f1": ("performance", "higher", [80.0, 85.0, 70.0, 72.0, 60.0]),
    "energy_kwh": ("efficiency", "lower", [5.0, 4.0, 3.0, 2.0, 1.0]),
    "gpu_hours": ("efficiency", "lower", [6.0, 3.5, 3.0, 2.5, 1.0]),
    "crows": ("fairness", "higher", [0.30, 0.40, 0.60, 0.50, 0.35]),
    "stereoset": ("fairness", "higher", [0.50, 0.55, 0.70, 0.40, 0.45]),
}
SEEDED = ("t1_acc", "t2_acc", "t2_f1")


def write_results(folder: Path, *, seeds: bool = True, spread: float = 4.0) -> Path:
    """A results dir like `vnr collect` writes; per-seed values (3 seeds) average to the matrix values."""
    folder.mkdir(parents=True, exist_ok=True)
    frame = pd.DataFrame({name: vals for name, (_, _, vals) in CRITERIA.items()}, index=MODELS)
    frame.index.name = "model"
    frame.to_csv(folder / "matrix.csv")
    sidecar = {
        "model_column": "model",
        "groups": ["performance", "efficiency", "fairness"],
        "criteria": {
            name: {"direction": d, "weight": 1.0, "group": g, "unit": "%" if g == "performance" else None}
            for name, (g, d, _) in CRITERIA.items()
        },
    }
    for attrs in sidecar["criteria"].values():
        if attrs["unit"] is None:
            del attrs["unit"]
    (folder / "criteria.yaml").write_text(yaml.safe_dump(sidecar, sort_keys=False))
    if seeds:
        rows = []
        offsets = np.array([-spread, 0.0, spread])
        for i, m in enumerate(MODELS):
            for j, name in enumerate(SEEDED):
                base = CRITERIA[name][2][i]
                sign = 1 if (i + j) % 2 else -1
                for s, off in enumerate(offsets):
                    rows.append({"model": m, "criterion": name, "seed": s, "value": base + sign * off})
        pd.DataFrame(rows).to_csv(folder / "seeds.csv", index=False)
    return folder


def scenario_file(folder: Path, text: str, name: str = "scenario.yaml") -> Path:
    path = folder / name
    path.write_text(text)
    return path
