// SPDX-License-Identifier: Apache-2.0
/// \file mamba2_head_step.hpp
/// Layer 5: the replay primitives for one Mamba-2 head of one request, written once for an
/// executor (replay/executor.hpp): the CPU path runs them serially, a CUDA block runs them
/// with its threads. An engine calls `mamba2_head_step` inside its own kernel with views of
/// its own buffers, or the pieces (`stage_*`, `flush_rows`, `read_rows`, `append_step`).
///
/// A step of a request with k = length + 1 window entries (the current token included):
///  - window not full: y = exp(L_k) (R C_k) + sum_j coef_j (B_j . C_k) x_j + D x_k, from the
///    read copy R and the window; the token is appended; no state is written;
///  - window full (flush): S = exp(L_k) S_c + sum_j coef_j x_j B_j^T is written to the
///    checkpoint (and the read copy), y = S C_k + D x_k, the window is emptied.
/// The conventional write-back step is the flush of a window of one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/numeric/activation.hpp"
#include "replayssm/numeric/math.hpp"
#include "replayssm/numeric/philox.hpp"
#include "replayssm/policy/policy.hpp"
#include "replayssm/recurrence/mamba2.hpp"
#include "replayssm/replay/scalar_decay.hpp"
#include "replayssm/replay/state_view.hpp"

namespace replayssm {

/// Window bookkeeping of one (slot, head): entries held, flushes done so far.
struct replay_cursor {
  int32_t length;
  uint32_t flushes;
};

/// Error bits a step reports instead of touching memory it must not touch.
enum step_error : uint32_t {
  step_ok = 0,
  error_slot_out_of_range = 1u << 0,    ///< a slot index outside [0, num_slots), not the pad id
  error_cursor_out_of_range = 1u << 1,  ///< a window length outside [0, capacity)
  error_phase_out_of_range = 1u << 2,   ///< a flush phase outside [0, window)
};

/// Rows and columns of one head's state.
struct mamba2_shape {
  int32_t head_dim;   ///< P
  int32_t state_dim;  ///< N
};

/// One head's step inputs and output (a request's activations for this head and its group).
template <class Act>
struct mamba2_head_inputs {
  const Act* x = nullptr;  ///< [P]
  const Act* z = nullptr;  ///< [P] gate, or null
  Act* y = nullptr;        ///< [P] output
  const Act* B = nullptr;  ///< [N] of the head's group
  const Act* C = nullptr;  ///< [N] of the head's group
  float dt_raw = 0.0f;
  float A = 0.0f;
  float D = 0.0f;
  float dt_bias = 0.0f;
  bool dt_softplus = true;
};

/// One head's recurrent state: checkpoint, read copy, window entries and cursor.
template <class Policy, class Act>
struct mamba2_head_state {
  state_head_view<typename Policy::checkpoint_format> checkpoint;
  state_head_view<typename Policy::read_format> read_copy;  ///< unused in shared mode
  Act* window_x = nullptr;  ///< entry j at window_x + j * window_x_stride, P values
  int64_t window_x_stride = 0;
  Act* window_B = nullptr;  ///< entry j of the head's group at window_B + j * window_B_stride
  int64_t window_B_stride = 0;
  float* window_dt = nullptr;  ///< entry j at window_dt[j * window_dt_stride]
  int64_t window_dt_stride = 0;
  replay_cursor* cursor = nullptr;  ///< may be null only for nearest-even write-back
  int32_t phase = 0;                ///< the first window holds window - phase steps
  bool appends_key = false;         ///< true on one head per group: it appends B
  random_stream_key key{};          ///< flush_index is taken from the cursor
};

/// Shared scratch of a head step, in floats, carved from one buffer (CUB's TempStorage idea
/// with run-time sizes: ask `bytes()`, pass a buffer that large).
template <class Policy>
struct mamba2_scratch_layout {
  static constexpr int window = Policy::window;
  /// Rows are padded to a multiple of this (the largest rows_per_item).
  static constexpr int row_block = 8;
  /// Rows one work item handles: 32 state values in registers, so that each thread has
  /// several independent loads in flight (4 rows of fp32 chunks: 2.3 TB/s in a read step on
  /// the H200; 8 rows: 3.4 TB/s).
  template <int K>
  static constexpr int rows_per_item = K >= 16 ? 2 : (K >= 8 ? 4 : 8);
  static constexpr int min_chunk = Policy::read_format::chunk_elems < Policy::checkpoint_format::chunk_elems
                                       ? Policy::read_format::chunk_elems
                                       : Policy::checkpoint_format::chunk_elems;
  int32_t padded_rows, partial_stride, log_decay, scale, coef, C, partial, xw, Bw, bc_partial, weight, window_sum,
      total;

  REPLAYSSM_HOST_DEVICE static mamba2_scratch_layout make(mamba2_shape s) {
    mamba2_scratch_layout l{};
    l.padded_rows = (s.head_dim + row_block - 1) / row_block * row_block;
    // Odd, so that the per-row sums (one thread per row) read distinct banks: a stride of
    // 32 floats put every row on one bank.
    l.partial_stride = s.state_dim / min_chunk + 1;
    int32_t at = 0;
    auto take = [&at](int32_t n) {
      const int32_t start = at;
      at += (n + 3) / 4 * 4;  // 16-byte aligned regions for vector reads
      return start;
    };
    l.log_decay = take(window);
    l.scale = take(window);
    l.coef = take(window + 1);
    l.C = take(s.state_dim);
    l.partial = take(l.padded_rows * l.partial_stride);
    // Window x: coef_j x_j for a flush, x_j for a read step.
    l.xw = take(window * l.padded_rows);
    // A flush needs Bw; a read step the B.C partials, weights and window sums.
    const int32_t shared_start = at;
    l.Bw = take(window * s.state_dim);
    const int32_t flush_end = at;
    at = shared_start;
    l.bc_partial = take(window * (s.state_dim / 16));
    l.weight = take(window);
    l.window_sum = take(l.padded_rows);
    l.total = at > flush_end ? at : flush_end;
    return l;
  }
  /// Scratch bytes a head step needs.
  REPLAYSSM_HOST_DEVICE size_t bytes() const { return size_t(total) * sizeof(float); }
};

namespace detail {

template <class Act>
REPLAYSSM_HOST_DEVICE float load_act(const Act* p, int64_t i) {
  return to_float(p[i]);
}

/// Dot product of 16 consecutive activations with 16 floats, in order.
template <class Act>
REPLAYSSM_HOST_DEVICE float dot16(const Act* a, const float* b) {
  float acc = 0.0f;
  for (int e = 0; e < 16; ++e) acc = math::fma(to_float(a[e]), b[e], acc);
  return acc;
}

template <int K>
REPLAYSSM_HOST_DEVICE float dot_chunk(const float (&s)[K], const float* q) {
  float acc = 0.0f;
  for (int e = 0; e < K; ++e) acc = math::fma(s[e], q[e], acc);
  return acc;
}

}  // namespace detail

/// Window length this step sees and whether it flushes; `error` is set on bad bookkeeping.
struct step_plan {
  int32_t k;        ///< window entries including the current token
  bool flush;       ///< the window is full after this token
  uint32_t flushes; ///< flushes done before this step
  uint32_t error;
};

/// Reads the cursor and decides the step.
template <class Policy, class Act>
REPLAYSSM_HOST_DEVICE step_plan plan_step(const mamba2_head_state<Policy, Act>& st) {
  const replay_cursor c = st.cursor != nullptr ? *st.cursor : replay_cursor{0, 0u};
  if (st.phase < 0 || st.phase >= Policy::window) return {0, false, c.flushes, error_phase_out_of_range};
  const int32_t capacity = c.flushes == 0 ? Policy::window - st.phase : Policy::window;
  if (c.length < 0 || c.length >= capacity) return {0, false, c.flushes, error_cursor_out_of_range};
  const int32_t k = c.length + 1;
  return {k, k == capacity, c.flushes, step_ok};
}

/// Stages the step sizes, log decays, C and the window's x, then the window coefficients
/// and the checkpoint decay.
template <class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE void stage_coefficients(const Exec& ex, const mamba2_head_inputs<Act>& in,
                                              const mamba2_head_state<Policy, Act>& st,
                                              mamba2_shape shape, const step_plan& plan,
                                              const mamba2_scratch_layout<Policy>& l,
                                              float* scratch) {
  const int32_t k = plan.k;
  ex.for_each(k, [&](int j) {
    const float dt = j < k - 1 ? st.window_dt[j * st.window_dt_stride]
                               : mamba2::step_size(in.dt_raw, in.dt_bias, in.dt_softplus);
    scratch[l.scale + j] = dt;
    scratch[l.log_decay + j] = mamba2::log_decay(dt, in.A);
  });
  ex.for_each(shape.state_dim, [&](int n) { scratch[l.C + n] = detail::load_act(in.C, n); });
  // The window's x (rows padded with zeros) is staged here, in the same memory latency:
  // reading it per row in the window sum serialized one latency per entry (365 against
  // 303 us per read step at batch 256 and k = 16 against k = 1 on the H200).
  const int32_t Pp = l.padded_rows;
  ex.for_each(k * Pp, [&](int i) {
    const int j = i / Pp, p = i % Pp;
    float x = 0.0f;
    if (p < shape.head_dim)
      x = j < k - 1 ? detail::load_act(st.window_x + j * st.window_x_stride, p) : detail::load_act(in.x, p);
    scratch[l.xw + i] = x;
  });
  ex.sync();
  ex.for_each(k + 1, [&](int j) {
    scratch[l.coef + j] = j < k ? window_coefficient(scratch + l.log_decay, scratch + l.scale, j, k)
                                : checkpoint_decay(scratch + l.log_decay, k);
  });
  ex.sync();
}

/// Flush: forms the state after the window, writes the checkpoint (and a separate read
/// copy) through the policy's formats and rounding, and leaves per-chunk partial sums of
/// S C in scratch. A work item is a few rows by a chunk of the wider format.
template <class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE void flush_rows(const Exec& ex, const mamba2_head_inputs<Act>& in,
                                      const mamba2_head_state<Policy, Act>& st, mamba2_shape shape,
                                      const step_plan& plan, const mamba2_scratch_layout<Policy>& l,
                                      float* scratch) {
  using ckpt_format = typename Policy::checkpoint_format;
  using read_format = typename Policy::read_format;
  constexpr int Kc = ckpt_format::chunk_elems;
  constexpr int Kr = read_format::chunk_elems;
  constexpr int KI = Policy::shared_state ? Kc : (Kc > Kr ? Kc : Kr);
  constexpr int R = mamba2_scratch_layout<Policy>::template rows_per_item<KI>;
  const int32_t P = shape.head_dim, N = shape.state_dim, Pp = l.padded_rows, k = plan.k;

  // Scale the staged x_j by coef_j and stage B_j as floats.
  ex.for_each(k * Pp, [&](int i) { scratch[l.xw + i] = math::mul(scratch[l.coef + i / Pp], scratch[l.xw + i]); });
  ex.for_each(k * N, [&](int i) {
    const int j = i / N, n = i % N;
    scratch[l.Bw + i] = j < k - 1 ? detail::load_act(st.window_B + j * st.window_B_stride, n)
                                  : detail::load_act(in.B, n);
  });
  ex.sync();

  const float total = scratch[l.coef + k];
  const int32_t columns = N / KI;
  random_stream_key key = st.key;
  key.flush_index = plan.flushes;
  ex.for_each(Pp / R * columns, [&](int item) {
    const int32_t r0 = item / columns * R, col = item % columns, n0 = col * KI;
    float s[R][KI];
    for (int r = 0; r < R; ++r) {
      for (int q = 0; q < KI / Kc; ++q) {
        float chunk[Kc] = {};
        if (r0 + r < P) st.checkpoint.load((r0 + r) * (N / Kc) + n0 / Kc + q, chunk);
        for (int e = 0; e < Kc; ++e) s[r][q * Kc + e] = math::mul(total, chunk[e]);
      }
    }
    for (int j = 0; j < k; ++j) {
      const float* b = scratch + l.Bw + j * N + n0;
      const float* x = scratch + l.xw + j * Pp + r0;
      for (int r = 0; r < R; ++r)
        for (int e = 0; e < KI; ++e) s[r][e] = math::fma(x[r], b[e], s[r][e]);
    }
    for (int r = 0; r < R && r0 + r < P; ++r) {
      scratch[l.partial + (r0 + r) * l.partial_stride + col] = detail::dot_chunk(s[r], scratch + l.C + n0);
      for (int q = 0; q < KI / Kc; ++q) {
        float chunk[Kc];
        for (int e = 0; e < Kc; ++e) chunk[e] = s[r][q * Kc + e];
        st.checkpoint.template store<typename Policy::rounding>((r0 + r) * (N / Kc) + n0 / Kc + q,
                                                                chunk, key);
      }
      if constexpr (!Policy::shared_state) {
        // A separate read copy rounds to nearest: its error is never fed back into the
        // recurrence, so stochastic rounding only adds variance (when the read copy still
        // rounded stochastically, the precision study measured 1.4x the output error).
        for (int q = 0; q < KI / Kr; ++q) {
          float chunk[Kr];
          for (int e = 0; e < Kr; ++e) chunk[e] = s[r][q * Kr + e];
          st.read_copy.template store<round_nearest_even>((r0 + r) * (N / Kr) + n0 / Kr + q, chunk, key);
        }
      }
    }
  });
  ex.sync();
}

/// Read step: per-chunk partial sums of R C_k from the read copy, and the window term
/// sum_j coef_j (B_j . C_k) x_j per row.
template <class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE void read_rows(const Exec& ex, const mamba2_head_inputs<Act>& in,
                                     const mamba2_head_state<Policy, Act>& st, mamba2_shape shape,
                                     const step_plan& plan, const mamba2_scratch_layout<Policy>& l,
                                     float* scratch) {
  using read_format = typename Policy::read_format;
  constexpr int Kr = read_format::chunk_elems;
  constexpr int R = mamba2_scratch_layout<Policy>::template rows_per_item<Kr>;
  const int32_t P = shape.head_dim, N = shape.state_dim, Pp = l.padded_rows, k = plan.k;
  const int32_t blocks16 = N / 16, columns = N / Kr;
  const auto& view = [&]() -> const auto& {
    if constexpr (Policy::shared_state) return st.checkpoint; else return st.read_copy;
  }();

  ex.for_each(k * blocks16, [&](int i) {
    const int j = i / blocks16, cb = i % blocks16;
    const Act* B = j < k - 1 ? st.window_B + j * st.window_B_stride : in.B;
    scratch[l.bc_partial + i] = detail::dot16(B + cb * 16, scratch + l.C + cb * 16);
  });
  ex.for_each(Pp / R * columns, [&](int item) {
    const int32_t r0 = item / columns * R, col = item % columns;
    float s[R][Kr];
    for (int r = 0; r < R; ++r) {
      if (r0 + r < P) view.load((r0 + r) * columns + col, s[r]);
    }
    for (int r = 0; r < R && r0 + r < P; ++r)
      scratch[l.partial + (r0 + r) * l.partial_stride + col] = detail::dot_chunk(s[r], scratch + l.C + col * Kr);
  });
  ex.sync();
  ex.for_each(k, [&](int j) {
    float bc = 0.0f;
    for (int cb = 0; cb < blocks16; ++cb) bc = math::add(bc, scratch[l.bc_partial + j * blocks16 + cb]);
    scratch[l.weight + j] = math::mul(scratch[l.coef + j], bc);
  });
  ex.sync();
  ex.for_each(P, [&](int p) {
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) acc = math::fma(scratch[l.weight + j], scratch[l.xw + j * Pp + p], acc);
    scratch[l.window_sum + p] = acc;
  });
  ex.sync();
}

/// Writes y from the staged partial sums: after a flush from the new state, else from the
/// read copy scaled by the checkpoint decay plus the window term.
template <class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE void write_outputs(const Exec& ex, const mamba2_head_inputs<Act>& in,
                                         mamba2_shape shape, const step_plan& plan,
                                         const mamba2_scratch_layout<Policy>& l,
                                         const float* scratch) {
  using ckpt_format = typename Policy::checkpoint_format;
  using read_format = typename Policy::read_format;
  constexpr int Kc = ckpt_format::chunk_elems, Kr = read_format::chunk_elems;
  constexpr int KI = Policy::shared_state ? Kc : (Kc > Kr ? Kc : Kr);
  const int32_t columns = shape.state_dim / (plan.flush ? KI : Kr);
  ex.for_each(shape.head_dim, [&](int p) {
    float state_term = 0.0f;
    for (int c = 0; c < columns; ++c) state_term = math::add(state_term, scratch[l.partial + p * l.partial_stride + c]);
    float window_term = 0.0f;
    if (!plan.flush) {
      state_term = math::mul(scratch[l.coef + plan.k], state_term);
      window_term = scratch[l.window_sum + p];
    }
    const float z = in.z != nullptr ? detail::load_act(in.z, p) : 0.0f;
    in.y[p] = from_float<Act>(mamba2::output(state_term, window_term, in.D, detail::load_act(in.x, p),
                                             z, in.z != nullptr));
  });
}

/// Appends the current token to the window (x, dt, and B on the group's appending head).
template <class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE void append_step(const Exec& ex, const mamba2_head_inputs<Act>& in,
                                       const mamba2_head_state<Policy, Act>& st, mamba2_shape shape,
                                       const step_plan& plan, const mamba2_scratch_layout<Policy>& l,
                                       const float* scratch) {
  const int32_t pos = plan.k - 1;
  ex.for_each(shape.head_dim, [&](int p) { st.window_x[pos * st.window_x_stride + p] = in.x[p]; });
  if (st.appends_key)
    ex.for_each(shape.state_dim, [&](int n) { st.window_B[pos * st.window_B_stride + n] = in.B[n]; });
  if (ex.leader()) st.window_dt[pos * st.window_dt_stride] = scratch[l.scale + pos];
}

/// One decode step of one head: plan, stage, flush or read, outputs, window and cursor.
/// Returns the step's error bits; on an error nothing is written.
template <class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE uint32_t mamba2_head_step(const Exec& ex, const mamba2_head_inputs<Act>& in,
                                                const mamba2_head_state<Policy, Act>& st,
                                                mamba2_shape shape, float* scratch) {
  const step_plan plan = plan_step(st);
  if (plan.error != step_ok) return plan.error;
  const auto l = mamba2_scratch_layout<Policy>::make(shape);
  stage_coefficients(ex, in, st, shape, plan, l, scratch);
  if (plan.flush) {
    flush_rows(ex, in, st, shape, plan, l, scratch);
  } else {
    read_rows(ex, in, st, shape, plan, l, scratch);
    append_step(ex, in, st, shape, plan, l, scratch);
  }
  write_outputs(ex, in, shape, plan, l, scratch);
  if (st.cursor != nullptr && ex.leader()) {
    *st.cursor = plan.flush ? replay_cursor{0, plan.flushes + 1} : replay_cursor{plan.k, plan.flushes};
  }
  return step_ok;
}

}  // namespace replayssm
