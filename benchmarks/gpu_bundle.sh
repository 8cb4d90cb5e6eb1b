#!/usr/bin/env bash
# Builds .gpubundle/ (git-ignored): delft's pinned TensorFlow stack as CPython 3.12 x86-64 wheels,
# unpacked, TensorFlow's C++ headers left out, xz-compressed and cut into 58 MiB parts, for a GPU
# machine that has no TensorFlow and takes at most 64 MiB per transfer (this workplace's device).
#   bash benchmarks/gpu_bundle.sh            # here, once (about 4 minutes on 2 cores)
# Then, on the device, one call per part (each copies its part out of the checkout, which the next
# call replaces): carry .gpubundle/tf.part.aa (then .ab, ...; rest.tar.xz with any of them) and run
#   mkdir -p /tmp/parts && cp .gpubundle/* /tmp/parts/
# and last:  source benchmarks/gpu_bundle_setup.sh /tmp/parts && bash benchmarks/gpu_check.sh
set -eu
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
WORK=$(mktemp -d); trap 'rm -rf "$WORK"' EXIT
version() { "$PY" -m pip show "$1" 2>/dev/null | sed -n 's/^Version: //p'; }
# what the device image lacks; numpy, h5py, scikit-learn, transformers, tokenizers come from it
PACKAGES=""
for name in tensorflow keras keras-hub kagglehub kagglesdk namex optree gast google-pasta astunparse \
            termcolor protobuf ml_dtypes lmdb flatbuffers wrapt; do
  PACKAGES="$PACKAGES $name==$(version $name)"
done
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
  --platform any -d "$WORK/wheels" $PACKAGES "nvidia-cuda-runtime-cu12>=12.5.82,<13"
mkdir -p "$WORK/site/data/sequenceLabelling/grobid/date"
for wheel in "$WORK"/wheels/*.whl; do unzip -q -o "$wheel" -d "$WORK/site"; done
rm -rf "$WORK/site/tensorflow/include" "$WORK"/site/nvidia/cuda_runtime/lib/*.a
"$PY" -c "import sys; sys.path.insert(0, '.'); from delft.utilities.data_path import shared_data_file as f; print(f('sequenceLabelling', 'grobid', 'date', 'date-220311.train'))" \
  | xargs -I{} cp {} "$WORK/site/data/sequenceLabelling/grobid/date/"
rm -rf .gpubundle && mkdir .gpubundle
(cd "$WORK/site" && tar -cf - tensorflow tensorflow-*.dist-info) | xz -T0 -6 | split -b 58M -a 2 - .gpubundle/tf.part.
(cd "$WORK/site" && tar -cJf - $(ls | grep -v -e '^tensorflow$' -e '^tensorflow-.*\.dist-info$')) \
  > .gpubundle/rest.tar.xz
ls -l .gpubundle
