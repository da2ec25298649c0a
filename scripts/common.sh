# SPDX-License-Identifier: Apache-2.0
# Shared by scripts/run_tests.sh and scripts/run_example.sh (sourced, not run).

# A step's banner, with the seconds since the script started (where its time goes).
step() { printf '\n==> %s (%d s)\n' "$*" "$SECONDS"; }
run() {
  printf '+ %s\n' "$*"
  "$@"
}

# Installs the Debian packages given as arguments that are not installed yet.
install_missing() {
  if ! command -v dpkg >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    echo "no dpkg/apt-get: not installing anything; $* must already be installed"
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

# The build tools, by package name, that are not on PATH (extra packages appended).
build_tool_packages() {
  local wanted=()
  command -v cmake >/dev/null 2>&1 || wanted+=(cmake)
  command -v g++ >/dev/null 2>&1 || wanted+=(g++)
  { command -v make >/dev/null 2>&1 || command -v ninja >/dev/null 2>&1; } || wanted+=(make)
  wanted+=("$@")
  if [ "${#wanted[@]}" -gt 0 ]; then printf '%s\n' "${wanted[@]}"; fi
}

# Puts the CUDA toolkit's nvcc on PATH when it is installed but not found.
find_nvcc() {
  if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
}
