#!/usr/bin/env bash
# The prepared GPU check (what it runs and prints: benchmarks/gpu_check.py). For a machine with no internet:
#   bash benchmarks/gpu_check.sh              # under 8 minutes on one H100/H200; stopped at 8 minutes regardless
#   bash benchmarks/gpu_check.sh --dry-run    # builds everything, runs no step; works on a CPU
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TOKENIZERS_PARALLELISM=false TRL_EXPERIMENTAL_SILENCE=1

# Every method plugin in plugins/, installed from this checkout where missing: no download (no dependencies, no
# build isolation). The test plugins are not installed: gpu_check.py makes them visible to its own processes.
for dir in plugins/*/; do
    [ -f "$dir/pyproject.toml" ] || continue
    dist=$(sed -n 's/^name = "\(.*\)"/\1/p' "$dir/pyproject.toml" | head -n 1)
    "$PY" -m pip show "$dist" >/dev/null 2>&1 || "$PY" -m pip install -q --no-deps --no-build-isolation -e "$dir"
done

exec timeout 480 "$PY" benchmarks/gpu_check.py "$@"
