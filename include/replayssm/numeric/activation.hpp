// SPDX-License-Identifier: Apache-2.0
/// \file activation.hpp
/// Activation element types (the element types of step inputs and outputs): `float`, the
/// library's `half_t` and `bfloat16_t`, and, under a CUDA compiler, CUDA's `__half` and
/// `__nv_bfloat16`, which convert through the library type of the same bits (so an engine's
/// tensors give the same results as the library's types).
#pragma once

#include <cstdint>
#include <type_traits>

#include "replayssm/config.hpp"
#include "replayssm/numeric/convert.hpp"
#include "replayssm/numeric/types.hpp"

#if REPLAYSSM_CUDA_COMPILER
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace replayssm {

/// Runtime tag of an activation element type, for sizing buffers whose type is chosen at run
/// time (the launchers take typed params).
enum class dtype : int32_t { f32 = 0, f16 = 1, bf16 = 2 };

/// Size in bytes of one element of `t` (0 for an invalid tag).
inline int dtype_size(dtype t) {
  switch (t) {
    case dtype::f32:
      return 4;
    case dtype::f16:
    case dtype::bf16:
      return 2;
  }
  return 0;
}

/// An activation element type: its runtime tag, and `storage`, the library type of the same
/// bits that its conversions go through (itself for the library's types).
template <class Act>
struct activation_traits;
template <>
struct activation_traits<float> {
  static constexpr dtype tag = dtype::f32;
  using storage = float;
};
template <>
struct activation_traits<half_t> {
  static constexpr dtype tag = dtype::f16;
  using storage = half_t;
};
template <>
struct activation_traits<bfloat16_t> {
  static constexpr dtype tag = dtype::bf16;
  using storage = bfloat16_t;
};

#if REPLAYSSM_CUDA_COMPILER
template <>
struct activation_traits<__half> {
  static constexpr dtype tag = dtype::f16;
  using storage = half_t;
  REPLAYSSM_HOST_DEVICE static half_t to_storage(__half v) { return half_t::from_bits(__half_raw(v).x); }
  REPLAYSSM_HOST_DEVICE static __half from_storage(half_t v) {
    __half_raw raw;
    raw.x = v.bits;
    return __half(raw);
  }
};
template <>
struct activation_traits<__nv_bfloat16> {
  static constexpr dtype tag = dtype::bf16;
  using storage = bfloat16_t;
  REPLAYSSM_HOST_DEVICE static bfloat16_t to_storage(__nv_bfloat16 v) {
    return bfloat16_t::from_bits(__nv_bfloat16_raw(v).x);
  }
  REPLAYSSM_HOST_DEVICE static __nv_bfloat16 from_storage(bfloat16_t v) {
    __nv_bfloat16_raw raw;
    raw.x = v.bits;
    return __nv_bfloat16(raw);
  }
};
#endif

/// True for the activation element types above.
template <class Act, class = void>
inline constexpr bool is_activation_v = false;
template <class Act>
inline constexpr bool is_activation_v<Act, std::void_t<decltype(activation_traits<Act>::tag)>> = true;

/// Widens an activation to float (exact).
REPLAYSSM_HOST_DEVICE float to_float(float v) {
  return v;
}
REPLAYSSM_HOST_DEVICE float to_float(half_t v) {
  return convert<float, half_t>::apply(v);
}
REPLAYSSM_HOST_DEVICE float to_float(bfloat16_t v) {
  return convert<float, bfloat16_t>::apply(v);
}
#if REPLAYSSM_CUDA_COMPILER
REPLAYSSM_HOST_DEVICE float to_float(__half v) {
  return to_float(activation_traits<__half>::to_storage(v));
}
REPLAYSSM_HOST_DEVICE float to_float(__nv_bfloat16 v) {
  return to_float(activation_traits<__nv_bfloat16>::to_storage(v));
}
#endif

/// Narrows a float to an activation type, rounding to nearest even.
template <class Act>
REPLAYSSM_HOST_DEVICE Act from_float(float v) {
  using storage = typename activation_traits<Act>::storage;
  if constexpr (std::is_same_v<storage, float>) {
    return v;
  } else if constexpr (std::is_same_v<storage, Act>) {
    return convert<Act, float>::apply(v);
  } else {
    return activation_traits<Act>::from_storage(convert<storage, float>::apply(v));
  }
}

}  // namespace replayssm
