// SPDX-License-Identifier: Apache-2.0
// Must fail to compile: built with -ffast-math (test/CMakeLists.txt), whose host code would
// not give the device's bits.
#include <replayssm/replayssm.hpp>

int main() { return replayssm::version_major; }
