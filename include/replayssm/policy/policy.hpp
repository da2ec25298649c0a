// SPDX-License-Identifier: Apache-2.0
/// \file policy.hpp
/// One policy type carries the window length, the read format, the checkpoint
/// format and the rounding mode. Kernels and primitives take a single policy type.
#pragma once

#include <type_traits>

#include "replayssm/numeric/formats.hpp"
#include "replayssm/numeric/rounding.hpp"

namespace replayssm {

/// Longest window a policy may use. The window is staged in shared memory at a flush and
/// its coefficients are kept per thread, so it is bounded.
inline constexpr int max_window = 64;

/// Replay policy.
///
/// \tparam Window           steps held in the window before a flush (1 = conventional write-back)
/// \tparam ReadFormat       format of the read copy that outputs read between flushes
/// \tparam CheckpointFormat format of the recurrent checkpoint that flushes read and write
/// \tparam Rounding         rounding used when a flush encodes the new checkpoint
///                          (`round_nearest_even` or `round_stochastic`); a separate read
///                          copy always rounds to nearest, since its error is not fed back
///
/// When `ReadFormat` and `CheckpointFormat` are the same type the read copy *is* the
/// checkpoint ("shared" mode): one buffer, no second write at a flush.
template <int Window, class ReadFormat, class CheckpointFormat = ReadFormat, class Rounding = round_nearest_even>
struct replay_policy {
  static_assert(Window >= 1 && Window <= max_window, "replay_policy: Window must lie in [1, max_window]");
  static_assert(state_format_check<ReadFormat>::ok,
                "replay_policy: ReadFormat does not model the state-format concept (docs/formats.md)");
  static_assert(state_format_check<CheckpointFormat>::ok,
                "replay_policy: CheckpointFormat does not model the state-format concept (docs/formats.md)");
  static_assert(std::is_same_v<ReadFormat, CheckpointFormat> ||
                    ReadFormat::bytes_per_element <= CheckpointFormat::bytes_per_element,
                "replay_policy: a separate read copy must not be wider than the checkpoint");
  static_assert(std::is_same_v<Rounding, round_nearest_even> || std::is_same_v<Rounding, round_stochastic>,
                "replay_policy: Rounding must be round_nearest_even or round_stochastic");

  static constexpr int window = Window;
  using read_format = ReadFormat;
  using checkpoint_format = CheckpointFormat;
  using rounding = Rounding;
  /// True when the read copy and the checkpoint are one buffer.
  static constexpr bool shared_state = std::is_same_v<ReadFormat, CheckpointFormat>;
  /// True for the conventional mode, which writes the state every step.
  static constexpr bool is_writeback = (Window == 1);
};

namespace detail {

template <class StateFormat, class Rounding>
struct writeback_policy_of {
  static_assert(state_format_v<StateFormat>,
                "writeback_policy takes a state format (e.g. fp32_format), not a policy; a policy runs as it is, "
                "e.g. decode_step<Policy>");
  using type = replay_policy<1, StateFormat, StateFormat, Rounding>;
};

template <class T, class = void>
struct is_policy : std::false_type {};
template <class T>
struct is_policy<T, std::void_t<decltype(T::window), typename T::read_format, typename T::checkpoint_format,
                                typename T::rounding, decltype(T::is_writeback)>> : std::true_type {};

}  // namespace detail

/// Whether `T` is a policy: a `replay_policy` (a `writeback_policy` is one), or a type
/// derived from one (Gated DeltaNet's `gdn_policy`).
template <class T>
inline constexpr bool is_policy_v = detail::is_policy<T>::value;

namespace detail {

/// Instantiated by every step that takes a policy: says so when given something else.
template <class T>
struct require_policy {
  static_assert(is_policy_v<T>,
                "the steps take a policy (replay_policy<W, Format> or writeback_policy<Format>), not a state format");
  static constexpr bool ok = true;
};

}  // namespace detail

/// The conventional read-update-write step: a window of one, the state in one format.
template <class StateFormat, class Rounding = round_nearest_even>
using writeback_policy = typename detail::writeback_policy_of<StateFormat, Rounding>::type;

}  // namespace replayssm
