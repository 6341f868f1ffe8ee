#!/usr/bin/env bash
# README's first command: the smoke grid end to end on this machine, offline, then its ranking.
#   bash scripts/smoke.sh                              # local executor (CPU or the local GPU)
#   bash scripts/smoke.sh --executor slurm --wait      # the same grid as a SLURM job array
# Sets up .venv like scripts/test.sh, uses ../shared/data as the data root where it exists, runs
# configs/experiments/smoke.yaml (tiny: models, a few minutes on a CPU; finished runs are skipped on
# a second call), collects results/smoke/matrix.csv and prints the user-weighted ranking table
# (weights 0.4 / 0.3 / 0.3 on performance / efficiency / fairness, Borda, two-step).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck disable=SC1091
. scripts/setup-env.sh
CONFIG=configs/experiments/smoke.yaml
OUT=${VNR_SMOKE_OUTPUT:-results/smoke}

vnr run "$CONFIG" --output "$OUT" "$@"
vnr status "$CONFIG" --output "$OUT" --summary
vnr collect "$CONFIG" --output "$OUT"
if [ -f configs/scenarios/user_weighted.yaml ]; then
  vnr rank --scenario configs/scenarios/user_weighted.yaml --results "$OUT"
else
  vnr rank "$OUT/matrix.csv" --rule borda --setting two-step \
    --group-weights performance=0.4,efficiency=0.3,fairness=0.3
fi
echo
echo "next: scripts/vnr runs vnr with .venv and the data root (or: export PATH=\"\$PWD/scripts:\$PATH\", then vnr ...)"
echo "      your own models: README.md, 'Your own models in 10 minutes' (configs/experiments/example_three_models.yaml)"
