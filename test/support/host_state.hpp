// SPDX-License-Identifier: Apache-2.0
// A layer's state in host memory, for any recurrence: the state pools, cursors and flush
// phases (each recurrence's host state adds its window buffers), the slots of a test batch,
// and the step runners that act on a host state.
#pragma once

#include "catch.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "replayssm/replayssm.hpp"

namespace replayssm_test {

using namespace replayssm;

/// 16-byte aligned storage for vector loads.
struct alignas(16) block16 {
  uint8_t bytes[16];
};
inline std::vector<block16> aligned_bytes(size_t n) { return std::vector<block16>((n + 15) / 16); }

/// The state pools (checkpoint and read copy), cursors and flush phases of one layer under
/// `Policy`, in host memory. `Sizes` is the recurrence's buffer sizes, `Shape` its layer
/// shape (which picks its write_head_state and read_head_state).
template <class Policy, class Sizes, class Shape>
struct host_state_pools {
  using policy = Policy;
  int heads;              ///< state heads per slot
  Shape shape;            ///< the layer's shape
  int64_t head_elements;  ///< state values of each
  int num_slots;
  int draft_tokens;  ///< verify steps of up to this many drafts (0: decode steps only)
  Sizes sizes;
  std::vector<block16> checkpoint, checkpoint_scales, read_copy, read_copy_scales;
  std::vector<replay_cursor> cursors;
  std::vector<int32_t> phase;

  host_state_pools(int state_heads, Shape layer_shape, int64_t elements_per_head, int slots, int drafts,
                   const Sizes& buffer_sizes)
      : heads(state_heads),
        shape(layer_shape),
        head_elements(elements_per_head),
        num_slots(slots),
        draft_tokens(drafts),
        sizes(buffer_sizes),
        checkpoint(aligned_bytes(sizes.checkpoint)),
        checkpoint_scales(aligned_bytes(sizes.checkpoint_scales)),
        read_copy(aligned_bytes(sizes.read_copy)),
        read_copy_scales(aligned_bytes(sizes.read_copy_scales)),
        cursors(size_t(slots) * size_t(state_heads), replay_cursor{}),
        phase(size_t(slots), 0) {}

  static void* ptr(std::vector<block16>& v) { return v.empty() ? nullptr : v.data(); }
  static float* ptr(std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }
  /// A window buffer of activations of type T.
  template <class T>
  static T* typed(std::vector<block16>& v) { return static_cast<T*>(ptr(v)); }

  /// Fills the fields of `p` that name the pools, the cursors and the flush phases.
  template <class Params>
  void bind_pools(Params& p, bool with_phase) {
    p.num_slots = num_slots;
    p.window_entries = draft_tokens > 0 ? Policy::window + draft_tokens : 0;
    p.checkpoint = ptr(checkpoint);
    p.checkpoint_scales = ptr(checkpoint_scales);
    p.read_copy = ptr(read_copy);
    p.read_copy_scales = ptr(read_copy_scales);
    p.cursors = cursors.data();
    p.flush_phase = with_phase ? phase.data() : nullptr;
  }

  state_head_view<typename Policy::checkpoint_format> checkpoint_view(int slot, int h) {
    return state_head_view<typename Policy::checkpoint_format>::in_pool(ptr(checkpoint), ptr(checkpoint_scales),
                                                                        int64_t(slot) * heads + h, head_elements);
  }
  state_head_view<typename Policy::read_format> read_view(int slot, int h) {
    return state_head_view<typename Policy::read_format>::in_pool(ptr(read_copy), ptr(read_copy_scales),
                                                                  int64_t(slot) * heads + h, head_elements);
  }

  /// Every byte of the pools, cursors and flush phases, then of `windows` (vectors of any
  /// type): to compare a state before and after a step.
  template <class... Windows>
  std::vector<uint8_t> bytes_with(const Windows&... windows) const {
    std::vector<uint8_t> all;
    const auto add = [&all](const auto& v) {
      const auto* first = reinterpret_cast<const uint8_t*>(v.data());
      all.insert(all.end(), first, first + v.size() * sizeof(v[0]));
    };
    for (const auto* v : {&checkpoint, &checkpoint_scales, &read_copy, &read_copy_scales}) add(*v);
    add(cursors);
    add(phase);
    (add(windows), ...);
    return all;
  }

  /// Sets slot `slot` to `values` (each head's state in turn, row-major) and empties its window.
  void set_state(int slot, const std::vector<double>& values) {
    std::vector<float> f(static_cast<size_t>(head_elements));
    for (int h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < head_elements; ++i) f[size_t(i)] = float(values[size_t(h * head_elements + i)]);
      write_head_state<Policy>(serial_executor{}, f.data(), shape, checkpoint_view(slot, h), read_view(slot, h));
      cursors[size_t(slot) * heads + h] = replay_cursor{};
    }
  }

  /// The decoded checkpoint of slot `slot`, each head's state in turn.
  std::vector<float> checkpoint_values(int slot) {
    std::vector<float> out(size_t(head_elements * heads));
    for (int h = 0; h < heads; ++h)
      read_head_state(serial_executor{}, checkpoint_view(slot, h), shape, out.data() + h * head_elements);
    return out;
  }
};

/// `n` normal values of standard deviation `sigma`: a random state.
inline std::vector<double> random_normal(size_t n, double sigma, std::mt19937_64& rng) {
  std::normal_distribution<double> unit(0.0, sigma);
  std::vector<double> v(n);
  for (auto& e : v) e = unit(rng);
  return v;
}

/// The slots of a case's requests: distinct (a step must not see one slot twice), spread out.
template <class Case>
std::vector<int32_t> request_slots(const Case& c) {
  std::vector<int32_t> slots;
  for (int b = 0; b < c.batch; ++b) slots.push_back((b * 2 + 1) % c.num_slots);
  std::vector<int32_t> distinct = slots;
  std::sort(distinct.begin(), distinct.end());
  REQUIRE(std::unique(distinct.begin(), distinct.end()) == distinct.end());
  return slots;
}

/// A step runner: performs one step of `p` over a host state (the CPU launchers, or a device
/// runner that mirrors the buffers).
template <class State>
using step_runner = std::function<status(const typename State::params&, State&)>;

}  // namespace replayssm_test
