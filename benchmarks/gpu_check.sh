#!/usr/bin/env bash
# The GPU checks of benchmarks/gpu_check.py in one command (under 8 minutes on one GPU):
#   bash benchmarks/gpu_check.sh [gpu_check.py options]     PYTHON=... to pick the interpreter
# Prints one table on stdout (progress on stderr); on a machine without a GPU it says so, exit 0.
set -u
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if ! "$PYTHON" -c "import tensorflow, keras" >/dev/null 2>&1; then
    echo "gpu_check: $PYTHON cannot import tensorflow and keras: install delft (pip install -e .)" \
         "or set PYTHON to an interpreter that has them" >&2
    exit 2
fi
export TF_CPP_MIN_LOG_LEVEL="${TF_CPP_MIN_LOG_LEVEL:-2}" PYTHONUNBUFFERED=1
unset DELFT_CPU_REPLICAS DELFT_CROSS_DEVICE_OPS
# the script stops starting checks after --budget (420 s); this is the hard stop
exec timeout --kill-after=10 470 "$PYTHON" benchmarks/gpu_check.py "$@"
