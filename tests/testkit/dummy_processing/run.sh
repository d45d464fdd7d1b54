#!/bin/bash
# Like training_code/runproc.sh: runs a script of the code dir, which /opt/ml relocation moves.
set -euo pipefail
cd "${SAGEMAKER_BASE_DIR:-/opt/ml}/processing/input/code"
exec python3 "$@"
