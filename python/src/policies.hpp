// SPDX-License-Identifier: Apache-2.0
/// \file policies.hpp
/// The policies compiled into the Python module, and how a policy index chosen at run time
/// reaches the policy type. Every policy runs both recurrences, CPU and CUDA; a policy with
/// a separate read copy also runs Gated DeltaNet in the `raw_inputs` window mode.
///
/// To add a policy, add one line to `policies` (a custom format: include its header above
/// the list, and Python names it by its `name`). A build with `REPLAYSSM_PYTHON_CUDA_POLICIES`
/// = N compiles the CUDA steps of the first N policies only (`cuda_policies`), in a fraction
/// of the time; the CPU steps keep every policy.
#pragma once

#include <replayssm/replayssm.hpp>

#include <string>
#include <type_traits>

#include "arrays.hpp"

namespace replayssm_python {

template <class... Ts>
struct type_list {};

template <class T>
struct tag {
  using type = T;
};

/// The compiled-in policies, one per line; Python's `replayssm.policies()` lists them.
// clang-format off
using policies = type_list<
    rs::writeback_policy<rs::fp32_format>,
    rs::replay_policy<16, rs::fp32_format>,
    rs::writeback_policy<rs::fp16_format>,
    rs::writeback_policy<rs::bf16_format>,
    rs::replay_policy<8, rs::fp32_format>,
    rs::replay_policy<32, rs::fp32_format>,
    rs::replay_policy<16, rs::fp16_format, rs::fp16_format, rs::round_stochastic>,
    rs::replay_policy<16, rs::bf16_format, rs::bf16_format, rs::round_stochastic>,
    rs::replay_policy<16, rs::fp16_format, rs::fp32_format>,
    rs::replay_policy<16, rs::fp8_e4m3_format, rs::fp16_format, rs::round_stochastic>,
    rs::replay_policy<16, rs::nvfp4_format, rs::fp16_format, rs::round_stochastic>>;
// clang-format on

/// The first `N` types of a list (all of them when it is shorter).
template <int N, class List, class Kept = type_list<>>
struct first_types {
  using type = Kept;
};
template <int N, class T, class... Ts, class... Kept>
struct first_types<N, type_list<T, Ts...>, type_list<Kept...>> {
  using type = std::conditional_t<(N > 0), typename first_types<N - 1, type_list<Ts...>, type_list<Kept..., T>>::type,
                                  type_list<Kept...>>;
};

/// The policies whose CUDA steps the module compiles.
#ifdef REPLAYSSM_PYTHON_CUDA_POLICIES
using cuda_policies = typename first_types<REPLAYSSM_PYTHON_CUDA_POLICIES, policies>::type;
#else
using cuda_policies = policies;
#endif

/// How many types a list holds.
template <class... Ts>
constexpr int type_count(type_list<Ts...>) {
  return int(sizeof...(Ts));
}

/// Calls `f(tag<T>{})` for the type at `index` of the list and returns what it returns; an
/// error for an index outside the list.
template <class... Ts, class F>
rs::status visit(type_list<Ts...> list, int index, F&& f) {
  rs::status result = rs::status::error(
      index >= type_count(list) && index < type_count(policies{})
          ? "replayssm: policy index " + std::to_string(index) + " has no CUDA steps in this build (built with " +
                "REPLAYSSM_PYTHON_CUDA_POLICIES=" + std::to_string(type_count(list)) + ": the first " +
                std::to_string(type_count(list)) + " policies)"
          : "replayssm: policy index " + std::to_string(index) + " is not compiled in");
  int i = 0;
  ((i++ == index ? void(result = f(tag<Ts>{})) : void()), ...);
  return result;
}

/// Calls `f(tag<T>{})` for every type of the list, in order.
template <class... Ts, class F>
void for_each_type(type_list<Ts...>, F&& f) {
  (f(tag<Ts>{}), ...);
}

/// `visit` over the policies of `List` for Gated DeltaNet: the policy at `index`, in the
/// raw_inputs window mode when `raw_inputs` (policies with a separate read copy only).
template <class List = policies, class F>
rs::status visit_gdn_policy(int index, bool raw_inputs, F&& f) {
  return visit(List{}, index, [&](auto t) -> rs::status {
    using policy = typename decltype(t)::type;
    if (!raw_inputs) return f(tag<policy>{});
    if constexpr (policy::shared_state) {
      return rs::status::error("gated_deltanet: the raw_inputs window mode needs a separate read copy; " +
                               rs::describe<policy>() + " keeps one state");
    } else {
      return f(tag<rs::gdn_policy<policy, rs::gdn_window::raw_inputs>>{});
    }
  });
}

/// The element type a state pool of `Format` is exchanged as: the format's own for the
/// unscaled float formats, bytes for every other.
template <class Format>
constexpr element pool_element() {
  if constexpr (std::is_same_v<Format, rs::fp32_format>) return element::f32;
  if constexpr (std::is_same_v<Format, rs::fp16_format>) return element::f16;
  if constexpr (std::is_same_v<Format, rs::bf16_format>) return element::bf16;
  return element::u8;
}

}  // namespace replayssm_python
