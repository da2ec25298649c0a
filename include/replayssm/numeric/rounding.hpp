// SPDX-License-Identifier: Apache-2.0
/// \file rounding.hpp
/// Rounding-mode tags, passed as the `Round` parameter of `convert` and of a
/// state format's `encode`.
#pragma once

namespace replayssm {

/// IEEE round-to-nearest, ties to even. Deterministic; needs no random bits.
struct round_nearest_even {
  static constexpr const char* name = "nearest-even";
  static constexpr bool is_stochastic = false;
};

/// Stochastic rounding with the semantics of PTX `cvt.rs`, fed by Philox-4x32-10 random
/// words (numeric/philox.hpp). See numeric/convert.hpp for how many bits each format uses.
struct round_stochastic {
  static constexpr const char* name = "stochastic(philox-10)";
  static constexpr bool is_stochastic = true;
};

}  // namespace replayssm
