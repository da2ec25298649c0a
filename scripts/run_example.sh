#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds and runs the decode_loop example: write-back and replay decode of a small
# Mamba-2 stack in lockstep, with their agreement printed at the end.
#
#   bash scripts/run_example.sh [decode_loop options, e.g. --steps 128 --stagger]
#
# Runs on the GPU (--device cuda) when nvidia-smi sees one and the build has CUDA, else on
# the CPU (--device cpu); a --device among the arguments takes precedence. On Debian/Ubuntu
# it first installs cmake, g++ and make with apt-get when missing.
# Environment: BUILD_DIR (default `build`, shared with scripts/run_tests.sh).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR="${BUILD_DIR:-build}"

# shellcheck source=scripts/common.sh
source scripts/common.sh

step "dependencies"
mapfile -t wanted < <(build_tool_packages)
if [ "${#wanted[@]}" -eq 0 ]; then
  echo "all present"
else
  install_missing "${wanted[@]}"
fi
find_nvcc

step "configure ($BUILD_DIR)"
config=(-DREPLAYSSM_BUILD_EXAMPLES=ON)
if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
  # A fresh build directory: the example needs neither Catch2 nor Google Benchmark.
  # scripts/run_tests.sh turns tests and benchmarks back on in the same directory.
  config+=(-DREPLAYSSM_BUILD_TESTS=OFF -DREPLAYSSM_BUILD_BENCHMARKS=OFF)
fi
run cmake -S . -B "$BUILD_DIR" "${config[@]}"

step "build decode_loop"
run cmake --build "$BUILD_DIR" -j "$(nproc)" --target decode_loop

device=cpu
if nvidia-smi -L >/dev/null 2>&1; then
  if grep -Eq '^CMAKE_CUDA_COMPILER:[A-Z]+=.*nvcc' "$BUILD_DIR/CMakeCache.txt" &&
    ! grep -Eq '^REPLAYSSM_ENABLE_CUDA:BOOL=OFF' "$BUILD_DIR/CMakeCache.txt"; then
    device=cuda
  else
    echo "a GPU is present but this build has no CUDA (no nvcc, or REPLAYSSM_ENABLE_CUDA=OFF): running on the CPU"
  fi
fi

step "run decode_loop on $device"
run "$BUILD_DIR/examples/decode_loop" --device "$device" "$@"
