// SPDX-License-Identifier: Apache-2.0
// Every host-compilable public header, included from a plain C++ translation unit: the
// replay primitives must build with g++ as well as nvcc.
#include <replayssm/replayssm.hpp>

#include "../support/catch.hpp"

TEST_CASE("the umbrella header compiles with a plain C++ compiler", "[headers]") {
  CHECK(REPLAYSSM_CUDA_COMPILER == 0);
  CHECK(REPLAYSSM_HAS_HW_STOCHASTIC_ROUNDING == 0);
}
