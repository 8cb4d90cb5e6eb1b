#!/bin/bash
# On a GPU machine whose Python has no TensorFlow (this workplace's device image: Python 3.12,
# PyTorch, CUDA 13 libraries): unpack what benchmarks/gpu_bundle.sh built into /tmp/site and give
# the image's CUDA 13 libraries the CUDA 12 names TensorFlow 2.21 opens (its stubs look functions
# up by name; measured working on an H200: cuBLAS, cuDNN 9.19, the cuDNN LSTM).
#   source benchmarks/gpu_bundle_setup.sh PARTS_DIR; bash benchmarks/gpu_check.sh
# Sets PYTHONPATH, LD_LIBRARY_PATH, DELFT_SHARED_DATA and PYTHON.
PARTS=${1:-/tmp/parts}
if [ ! -f /tmp/site/.unpacked ]; then
  mkdir -p /tmp/site
  cat "$PARTS"/tf.part.* | xz -d -T0 | tar -x -C /tmp/site || { echo "setup: TensorFlow unpack failed" >&2; return 1; }
  tar -xJf "$PARTS"/rest.tar.xz -C /tmp/site || { echo "setup: packages unpack failed" >&2; return 1; }
  touch /tmp/site/.unpacked
fi
SP=$(python3 -c 'import site; print(site.getsitepackages()[0])')
ROOTS="$SP/nvidia $(ls -d /usr/local/cuda*/lib64 2>/dev/null)"
LIBRARIES=$(find $ROOTS -name 'lib*.so*' 2>/dev/null | sort)
ALIASES=/tmp/cuda12-names; mkdir -p $ALIASES
alias_lib() {  # alias_lib NAME_TENSORFLOW_OPENS PATTERN_OF_THE_IMAGE (a regex of the file name)
  local found=$(grep -E "/$2\$" <<<"$LIBRARIES" | head -1)
  if [ -n "$found" ]; then ln -sf "$found" $ALIASES/$1; else echo "setup: no $2 on this machine" >&2; fi
}
alias_lib libcublas.so.12 'libcublas\.so\.1[0-9]'
alias_lib libcublasLt.so.12 'libcublasLt\.so\.1[0-9]'
alias_lib libcufft.so.11 'libcufft\.so\.1[0-9]'
alias_lib libcusolver.so.11 'libcusolver\.so\.1[0-9]'
alias_lib libcusparse.so.12 'libcusparse\.so\.1[0-9]'
alias_lib libcurand.so.10 'libcurand\.so\.1[0-9]'
alias_lib libcudnn.so.9 'libcudnn\.so\.9'
alias_lib libnccl.so.2 'libnccl\.so\.2'
LIBRARY_DIRS=$(dirname $LIBRARIES 2>/dev/null | sort -u | paste -sd:)
export LD_LIBRARY_PATH=/tmp/site/nvidia/cuda_runtime/lib:$ALIASES:$LIBRARY_DIRS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONPATH=/tmp/site DELFT_SHARED_DATA=/tmp/site/data PYTHON=python3
