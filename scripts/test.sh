#!/usr/bin/env bash
# The project's test command: sets up everything it needs on a fresh machine, then runs pytest.
#   bash scripts/test.sh [pytest args...]
# - a virtualenv in .venv (reused when present)
# - torch==2.13.0 first (on CI machines that is the local CPU wheel: no CUDA packages are pulled)
# - the project with its harness and dev extras
# - as root, best effort: a single-node SLURM (slurm/start-local-cluster.sh) and Debian's chromium,
#   so the SLURM and browser tests run; without them those tests are skipped with a reason.
set -euo pipefail
cd "$(dirname "$0")/.."
# data root, offline flags, .venv with torch and the project (shared with scripts/smoke.sh)
# shellcheck disable=SC1091
. scripts/setup-env.sh
if [ "$(id -u)" = 0 ] && [ -z "${VNR_SKIP_SYSTEM:-}" ]; then
  if [ -x slurm/start-local-cluster.sh ]; then
    bash slurm/start-local-cluster.sh > /tmp/vnr-slurm-setup.log 2>&1 \
      || echo "SLURM could not start (see /tmp/vnr-slurm-setup.log): its tests will be skipped"
  fi
  if ! command -v chromium >/dev/null 2>&1; then
    (apt-get install -y -q chromium > /tmp/vnr-chromium-setup.log 2>&1 \
      || (apt-get update -q > /dev/null 2>&1 && apt-get install -y -q chromium >> /tmp/vnr-chromium-setup.log 2>&1)) \
      || echo "chromium could not be installed: the browser test will be skipped"
  fi
fi
ruff check harness ranking scripts tests
exec python -m pytest "$@"
