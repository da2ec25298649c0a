#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Builds ReplaySSM with its tests, examples and benchmarks, and runs the test suite; then
# installs the Python package into a virtual environment and runs its tests (pytest).
#
#   bash scripts/run_tests.sh [extra CMake configure arguments]
#
# On Debian/Ubuntu it first installs what is missing (cmake, g++, make, catch2,
# libbenchmark-dev) with apt-get. nvcc is optional: when CMake finds it, the CUDA targets
# are built too, and the GPU tests (CTest label `gpu`) skip themselves without a device;
# then the host targets are also built and tested once without CUDA (in BUILD_DIR-host),
# so that the g++-only build cannot break unnoticed.
# nanobind, scikit-build-core, NumPy, pytest and PyTorch are installed from PyPI into
# BUILD_DIR-python/venv in the background while the C++ targets build (python3 with venv and
# its headers from apt-get when missing); the Python step waits for them.
# Environment: BUILD_DIR (default `build`, relative to the repository root); CI=true turns
# warnings into errors (-DREPLAYSSM_WERROR=ON) and compiles device code at nvcc's fastest
# level (-Ofc max), as CI runs it (`CI=true bash .ci/run`).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD_DIR="${BUILD_DIR:-build}"

# shellcheck source=scripts/common.sh
source scripts/common.sh

step "dependencies"
mapfile -t wanted < <(build_tool_packages catch2 libbenchmark-dev)
install_missing "${wanted[@]}"
find_nvcc
have_nvcc=false
if command -v nvcc >/dev/null 2>&1; then
  have_nvcc=true
  echo "nvcc: $(command -v nvcc) (CUDA targets are built, then the host targets once more without CUDA)"
else
  echo "nvcc: not found (host targets only)"
fi
# Warnings are errors in CI only: a user's newer compiler must not break their build.
werror=OFF
# CI compiles device code at nvcc's fastest level (-Ofc max: fewer optimizations, far less
# CPU time): it has no device to run it on, and every kernel still goes through ptxas to
# machine code. Elsewhere the kernels are compiled as users get them.
cuda_flags=()
if [ "${CI:-}" = true ]; then werror=ON; fi
if [ "${CI:-}" = true ] && [ "$have_nvcc" = true ]; then cuda_flags=(-DCMAKE_CUDA_FLAGS=-Ofc=max); fi
echo "warnings as errors: $werror, CUDA flags: ${cuda_flags[*]:-none} (CI=${CI:-})"

# The Python package's environment (nanobind, scikit-build-core, NumPy, pytest, PyTorch) is
# downloaded and installed in the background while the C++ targets build: mostly network and
# disk, which would otherwise add minutes after the build. The Python step waits for it.
py_dir="${BUILD_DIR}-python"
if ! python3 -m venv --help >/dev/null 2>&1 ||
  [ ! -f "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)/Python.h" ]; then
  install_missing python3 python3-venv python3-dev
fi
mkdir -p "$py_dir"
python_environment() {
  set -euo pipefail
  [ -x "$py_dir/venv/bin/python" ] || run python3 -m venv "$py_dir/venv"
  run "$py_dir/venv/bin/python" -m pip install --quiet --upgrade nanobind scikit-build-core numpy pytest
  # PyTorch, for the tests of the torch ops, torch.compile and the engine wrappers: PyPI's
  # default Linux wheel, which brings NVIDIA's CUDA libraries (PyPI has no CPU-only one;
  # some 5 GB the first time, a later run finds it in the virtual environment). The check
  # below fails the run if it cannot be imported, so that its tests are run, not skipped.
  run "$py_dir/venv/bin/python" -m pip install --quiet torch
  run "$py_dir/venv/bin/python" -c "import torch; print('torch', torch.__version__)"
}
python_environment > "$py_dir/environment.log" 2>&1 &
python_environment_pid=$!
# A run that fails before the Python step leaves no install running behind it.
trap 'pkill -P "$python_environment_pid" 2>/dev/null || true; kill "$python_environment_pid" 2>/dev/null || true' EXIT
echo "Python environment: installing in the background ($py_dir/environment.log)"
# Waits for the background install and prints its log; fails the run if it failed.
wait_for_python_environment() {
  local rc=0
  wait "$python_environment_pid" || rc=$?
  cat "$py_dir/environment.log"
  if [ "$rc" -ne 0 ]; then
    echo "error: the Python environment's install failed (exit $rc)" >&2
    exit "$rc"
  fi
}

step "configure ($BUILD_DIR)"
run cmake -S . -B "$BUILD_DIR" -DREPLAYSSM_WERROR="$werror" "${cuda_flags[@]}" \
  -DREPLAYSSM_BUILD_TESTS=ON -DREPLAYSSM_BUILD_EXAMPLES=ON -DREPLAYSSM_BUILD_BENCHMARKS=ON "$@"

step "build"
run cmake --build "$BUILD_DIR" -j "$(nproc)"

step "test"
run ctest --test-dir "$BUILD_DIR" --output-on-failure

if [ "$have_nvcc" = true ]; then
  # The g++-only build must not break unnoticed. Of the host targets, only these examples
  # compile differently without CUDA (nvcc above, g++ here): every other host target was
  # compiled by g++ above already, with the same flags, so it is not built twice (the host
  # tests and precision_study alone take over ten CPU-minutes). Their tests are the ones
  # whose names start with the target's name (decode_loop_example, decode_loop_gdn_example, ...).
  host_dir="${BUILD_DIR}-host"
  host_targets=(decode_loop fused_kernel spec_decode)
  step "configure without CUDA ($host_dir)"
  run cmake -S . -B "$host_dir" -DREPLAYSSM_WERROR="$werror" \
    -DREPLAYSSM_BUILD_TESTS=ON -DREPLAYSSM_BUILD_EXAMPLES=ON -DREPLAYSSM_BUILD_BENCHMARKS=OFF "$@" \
    -DREPLAYSSM_ENABLE_CUDA=OFF

  step "build without CUDA: ${host_targets[*]}"
  run cmake --build "$host_dir" -j "$(nproc)" --target "${host_targets[@]}"

  step "test without CUDA: ${host_targets[*]}"
  run ctest --test-dir "$host_dir" --output-on-failure --no-tests=error \
    -R "^($(IFS='|'; echo "${host_targets[*]}"))"
fi

# The Python package, as a user installs it (`pip install .`, with its CUDA steps when nvcc
# is found) into a virtual environment of its own, and its tests (the GPU ones skip
# themselves without a device or torch).
step "Python package ($py_dir)"
wait_for_python_environment
# Under CI=true the module compiles the CUDA steps of its first policy only (FP32 write-back,
# both recurrences: the module's CUDA side for any policy; -Ofc max as above): the kernel
# templates were compiled above for the GPU tests and the benchmark, and every policy's would
# add about ten CPU-minutes of nvcc for kernels CI cannot run. Its CPU steps keep every
# policy.
py_cuda=()
if [ "${CI:-}" = true ] && [ "$have_nvcc" = true ]; then
  py_cuda=(-C cmake.define.REPLAYSSM_PYTHON_CUDA_POLICIES=1 -C cmake.define.CMAKE_CUDA_FLAGS=-Ofc=max)
fi
run "$py_dir/venv/bin/python" -m pip install --quiet --no-build-isolation --no-deps \
  -C build-dir="$py_dir/build" -C cmake.define.REPLAYSSM_WERROR="$werror" "${py_cuda[@]}" .

step "Python tests"
run "$py_dir/venv/bin/python" -m pytest -q python/tests

step "done: all tests passed"
