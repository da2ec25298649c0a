// SPDX-License-Identifier: Apache-2.0
/// \file activation.hpp
/// Activation element types (the dtypes of step inputs and outputs).
#pragma once

#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/numeric/convert.hpp"
#include "replayssm/numeric/types.hpp"

namespace replayssm {

/// Runtime tag of an activation element type.
enum class dtype : int32_t { f32 = 0, f16 = 1, bf16 = 2 };

/// Size in bytes of one element of `t` (0 for an invalid tag).
inline int dtype_size(dtype t) {
  switch (t) {
    case dtype::f32: return 4;
    case dtype::f16:
    case dtype::bf16: return 2;
  }
  return 0;
}

/// Activation element types and their runtime tags.
template <class Act>
struct activation_traits;
template <>
struct activation_traits<float> {
  static constexpr dtype tag = dtype::f32;
};
template <>
struct activation_traits<half_t> {
  static constexpr dtype tag = dtype::f16;
};
template <>
struct activation_traits<bfloat16_t> {
  static constexpr dtype tag = dtype::bf16;
};

/// Widens an activation to float (exact).
REPLAYSSM_HOST_DEVICE float to_float(float v) { return v; }
REPLAYSSM_HOST_DEVICE float to_float(half_t v) { return convert<float, half_t>::apply(v); }
REPLAYSSM_HOST_DEVICE float to_float(bfloat16_t v) { return convert<float, bfloat16_t>::apply(v); }

/// Narrows a float to an activation type, rounding to nearest even.
template <class Act>
REPLAYSSM_HOST_DEVICE Act from_float(float v) {
  if constexpr (activation_traits<Act>::tag == dtype::f32) {
    return v;
  } else {
    return convert<Act, float>::apply(v);
  }
}

/// Calls `f(Act{})` with the activation type that `t` names; returns false for an invalid tag.
template <class F>
bool dispatch_dtype(dtype t, F&& f) {
  switch (t) {
    case dtype::f32: f(float{}); return true;
    case dtype::f16: f(half_t{}); return true;
    case dtype::bf16: f(bfloat16_t{}); return true;
  }
  return false;
}

}  // namespace replayssm
