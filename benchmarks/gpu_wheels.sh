#!/usr/bin/env bash
# The wheels the GPU check takes to a machine with no network (benchmarks/README.md): the packages stackrl needs
# that the GPU machine lacks or holds in another version, at the versions this checkout's .venv runs (make
# .venv/bin/stackrl), for that machine's Python (PY_VERSION, default 3.12) on x86-64. They go to .whl
# (git-ignored), or to $1.
#   bash benchmarks/gpu_wheels.sh [FOLDER]
# bitsandbytes ships one library per CUDA release (43 MB in all); only the one for the machine's torch is kept
# (BNB_CUDA, default 130: torch 2.11+cu130), so that the wheels and the working tree fit in one call's 64 MiB.
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-.whl}
BNB_CUDA=${BNB_CUDA:-130}
PY_VERSION=${PY_VERSION:-3.12}
# The machine has torch, accelerate's and transformers' other needs, pandas, pyarrow, xxhash, fsspec; not these.
PACKAGES=(trl transformers peft accelerate datasets dill multiprocess omegaconf bitsandbytes regex
          math-verify latex2sympy2_extended antlr4-python3-runtime)
PLATFORMS=(manylinux_2_35_x86_64 manylinux_2_34_x86_64 manylinux_2_31_x86_64 manylinux_2_28_x86_64
           manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux1_x86_64)

pins=$(.venv/bin/python -c 'import sys; from importlib.metadata import version
print(" ".join(f"{name}=={version(name)}" for name in sys.argv[1:]))' "${PACKAGES[@]}")
rm -rf "$DEST"
mkdir -p "$DEST"
# shellcheck disable=SC2086  # one argument per pin
.venv/bin/python -m pip download --quiet --no-deps --only-binary=:all: --python-version "$PY_VERSION" --implementation cp \
    ${PLATFORMS[@]/#/--platform } -d "$DEST" $pins

.venv/bin/python - "$DEST" "$BNB_CUDA" <<'EOF'
"""Rewrite the bitsandbytes wheel with its CPU library and the one CUDA build kept, and its RECORD to match."""
import re
import sys
import zipfile
from pathlib import Path

dest, cuda = Path(sys.argv[1]), sys.argv[2]
(wheel,) = dest.glob("bitsandbytes-*.whl")
keep = re.compile(rf"libbitsandbytes_(cpu|cuda{cuda})\.so$")
dropped = lambda name: "/libbitsandbytes_" in name and not keep.search(name)
slim = wheel.with_suffix(".slim")
with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(slim, "w", zipfile.ZIP_DEFLATED) as out:
    for item in src.infolist():
        if dropped(item.filename):
            continue
        data = src.read(item)
        if item.filename.endswith(".dist-info/RECORD"):
            rows = data.decode().splitlines(keepends=True)
            data = "".join(row for row in rows if not dropped(row.split(",")[0])).encode()
        out.writestr(item, data)
slim.replace(wheel)
EOF
ls -l "$DEST"
du -sh "$DEST"
