#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds ReplaySSM with its tests, examples and benchmarks, and runs the test suite.
#
#   bash scripts/run_tests.sh [extra CMake configure arguments]
#
# On Debian/Ubuntu it first installs what is missing (cmake, g++, make, catch2 v2,
# libbenchmark-dev) with apt-get. nvcc is optional: when CMake finds it, the CUDA targets
# are built too, and the GPU tests (CTest label `gpu`) skip themselves without a device.
# Environment: BUILD_DIR (default `build`, relative to the repository root).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR="${BUILD_DIR:-build}"

# shellcheck source=scripts/common.sh
source scripts/common.sh

step "dependencies"
mapfile -t wanted < <(build_tool_packages catch2 libbenchmark-dev)
install_missing "${wanted[@]}"
find_nvcc
if command -v nvcc >/dev/null 2>&1; then
  echo "nvcc: $(command -v nvcc) (CUDA targets are built)"
else
  echo "nvcc: not found (host targets only)"
fi

step "configure ($BUILD_DIR)"
run cmake -S . -B "$BUILD_DIR" \
  -DREPLAYSSM_BUILD_TESTS=ON -DREPLAYSSM_BUILD_EXAMPLES=ON -DREPLAYSSM_BUILD_BENCHMARKS=ON "$@"

step "build"
run cmake --build "$BUILD_DIR" -j "$(nproc)"

step "test"
run ctest --test-dir "$BUILD_DIR" --output-on-failure

step "done: all tests passed"
