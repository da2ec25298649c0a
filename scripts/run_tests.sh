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

step() { printf '\n==> %s\n' "$*"; }
run() {
  printf '+ %s\n' "$*"
  "$@"
}

# Installs the Debian packages given as arguments that are not installed yet.
install_missing() {
  if ! command -v dpkg >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "no dpkg/apt-get: not installing anything; CMake, a C++17 compiler, Catch2 v2 and"
    echo "Google Benchmark must already be installed"
    return 0
  fi
  local missing=()
  local pkg
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    echo "all present"
    return 0
  fi
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "error: missing packages ${missing[*]} and not root (no sudo)" >&2
      return 1
    fi
  fi
  echo "missing: ${missing[*]}"
  run "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
  run "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

step "dependencies"
wanted=()
command -v cmake >/dev/null 2>&1 || wanted+=(cmake)
command -v g++ >/dev/null 2>&1 || wanted+=(g++)
{ command -v make >/dev/null 2>&1 || command -v ninja >/dev/null 2>&1; } || wanted+=(make)
wanted+=(catch2 libbenchmark-dev)
install_missing "${wanted[@]}"

if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
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
