#!/usr/bin/env bash
# Shared by scripts/test.sh and scripts/smoke.sh; source it from the project root:
#   . scripts/setup-env.sh
# - VNR_DATA_ROOT=../shared/data where that folder exists (and the variable is not set)
# - offline flags for the Hugging Face libraries
# - a virtualenv in .venv (reused when present), activated
# - torch==2.13.0 first (on CI machines that is the local CPU wheel: no CUDA packages are pulled),
#   then the project with its harness and dev extras
if [ -d ../shared/data ] && [ -z "${VNR_DATA_ROOT:-}" ]; then export VNR_DATA_ROOT="$(cd ../shared/data && pwd)"; fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export MPLBACKEND=Agg
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
  echo "installing torch and the project into .venv (first time, ~3 min; pip's output in .venv/setup.log) ..." >&2
else
  echo "checking the installs in .venv (pip's output in .venv/setup.log) ..." >&2
fi
SECONDS=0
# shellcheck disable=SC1091
. .venv/bin/activate
# pip's output (and this machine's index warnings) go to .venv/setup.log; shown only if an install fails
if ! { pip install -q --disable-pip-version-check torch==2.13.0 \
       && pip install -q --disable-pip-version-check -e '.[harness,dev]'; } > .venv/setup.log 2>&1; then
  cat .venv/setup.log >&2
  echo "setup failed: see the pip output above (also in .venv/setup.log)" >&2
  return 1 2>/dev/null || exit 1
fi
echo "done (${SECONDS} s)" >&2
