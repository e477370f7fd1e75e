#!/usr/bin/env bash
# Bring DALI's CUDA 13 wheel (and what the device image lacks) to a GPU machine that cannot
# reach a package index, through calls that each carry at most 64 MiB (see docs/gpu.md).
#
#   bench/gpu_wheels.sh prepare    here (pip + network): wheels for the device's Python 3.12
#                                  into .whl/wheels, one tar of them split into 50 MiB parts
#                                  .whl/parts/part-aa, part-ab, ... and .whl/SHA256SUMS
#   bench/gpu_wheels.sh stash      there, once per call that carries some parts
#                                  (carry: [".whl/parts/part-aa", ...]): copies them to
#                                  /tmp/wheel-parts, which lives as long as the machine
#   bench/gpu_wheels.sh install    there, after every part is stashed: joins the parts,
#                                  checks the sums, pip install --target /tmp/site; then
#                                  export PYTHONPATH=/tmp/site:$PWD
#
# .whl/ must be ignored by git (it is in .gitignore). Only the wheels the device image does
# not already hold are fetched (its list: the device tool's KINDS.md).
set -euo pipefail
WANT=(nvidia-dali-cuda130==2.4.0 "nvidia-nvimgcodec-cu13[all]==0.9.0.20"
      nvidia-libnvcomp-cu13==5.3.0.16 nvidia-nvjpeg nvidia-nvjpeg2k-cu13 nvidia-nvtiff-cu13
      astunparse gast optree makefun "libcst~=1.8" nvtx av spectral)
PLATFORMS=(manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64
           manylinux2014_x86_64 manylinux1_x86_64)

prepare() {
  mkdir -p .whl/wheels .whl/parts
  local plat=()
  for p in "${PLATFORMS[@]}"; do plat+=(--platform "$p"); done
  python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp "${plat[@]}" -d .whl/wheels "${WANT[@]}"
  rm -f .whl/parts/part-*
  tar cf - -C .whl/wheels . | split -b 50m - .whl/parts/part-
  (cd .whl/parts && sha256sum part-* > ../SHA256SUMS)
  ls -la .whl/parts
}

stash() {
  mkdir -p /tmp/wheel-parts
  cp -v .whl/parts/part-* /tmp/wheel-parts/
  [ -f .whl/SHA256SUMS ] && cp .whl/SHA256SUMS /tmp/wheel-parts/
  ls /tmp/wheel-parts
}

install() {
  cd /tmp/wheel-parts
  sha256sum -c SHA256SUMS
  mkdir -p /tmp/wheels && cat part-* | tar xf - -C /tmp/wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site /tmp/wheels/*.whl
  echo "installed; now: export PYTHONPATH=/tmp/site:\$PWD"
}

case "${1:-}" in
  prepare) prepare ;;
  stash) stash ;;
  install) install ;;
  *) echo "usage: $0 prepare|stash|install" >&2; exit 2 ;;
esac
