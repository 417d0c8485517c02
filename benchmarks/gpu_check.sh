#!/usr/bin/env bash
# The prepared GPU check (what it measures and writes: benchmarks/gpu_check.py; the one command for a machine
# with no network, and its output: benchmarks/README.md).
#   bash benchmarks/gpu_check.sh --out DIR               # on a GPU machine with stackrl installed
#   WHEELS=.whl bash benchmarks/gpu_check.sh --out DIR   # installs benchmarks/gpu_wheels.sh's wheels first
#   bash benchmarks/gpu_check.sh --dry-run               # every configuration, one step, tiny, on the CPU
# Where stackrl is not installed, gpu_check.py runs this checkout's source. Stopped at 9 minutes regardless.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PYTHON:-}" ]; then
    PYTHON=python3
    [ -x .venv/bin/python ] && PYTHON=.venv/bin/python
fi
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false TRL_EXPERIMENTAL_SILENCE=1 PYTHONUNBUFFERED=1

if [ -n "${WHEELS:-}" ]; then
    # Ahead of the machine's own packages on the path; one version of each, no index, nothing compiled.
    site=$(mktemp -d /tmp/stackrl-wheels-XXXXXX)
    "$PYTHON" -m pip install --quiet --no-index --no-deps --no-compile --no-cache-dir --target "$site" "$WHEELS"/*.whl
    export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
fi
exec timeout 540 "$PYTHON" benchmarks/gpu_check.py "$@"
