#!/usr/bin/env bash
# The GPU check (benchmarks/gpu_check.py: QA through torchrun on NCCL with bf16/tf32, FSDP, bench_gpu.py) on a
# machine with a CUDA GPU, PyTorch and no package registry. Run from a copy of the checkout (no install needed):
#
#     WHEELS=whl OUT=/some/dir benchmarks/gpu_check.sh [gpu_check.py options]
#
# WHEELS: a folder of the wheels the machine lacks, installed into a private folder put first on PYTHONPATH, so the
# pinned versions the jobs run win over the machine's own. Fetched where pip works (Python 3.12, x86-64 Linux):
#
#     python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#         --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d whl \
#         transformers==5.3.0 huggingface-hub==1.10.0 tokenizers==0.22.2 datasets==4.5.0 dill==0.4.0 \
#         multiprocess==0.70.18 fsspec==2025.10.0
#
# (the versions of requirements-dev.txt / training_code/requirements.txt; the machine's accelerate 1.15.0 is the
# pinned one). Output: gpu_check.{json,md}, one log per run and bench/ in $OUT, and the whole console in $OUT/log.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
OUT=${OUT:-benchmarks/results}
mkdir -p "$OUT"
if [ -n "${WHEELS:-}" ]; then
    site=${GPU_CHECK_SITE:-/tmp/gpu-check-site}
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" \
        "$WHEELS"/*.whl
    export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD:$PWD/training_code${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || true
df -h "${TMPDIR:-/tmp}" | tail -1
set -o pipefail
"$PYTHON" benchmarks/gpu_check.py --out "$OUT" "$@" 2>&1 | tee "$OUT/log.txt"
