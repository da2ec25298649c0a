// SPDX-License-Identifier: Apache-2.0
/// \file head_step.hpp
/// The replay primitives for one Mamba-2 head of one request, written once for an
/// executor (replay/executor.hpp): the CPU path runs them serially, a CUDA block runs them
/// with its threads. An engine calls `mamba2_head_step` (a decode step, or with
/// `step_kind::verify` a verify step of speculative drafts) inside its own kernel with views of its own buffers, or the
/// pieces
/// (`plan_step`, `stage_coefficients`, `window_dots`, `flush_rows` or `read_rows`,
/// `window_sums`, `write_outputs`, `append_tokens`).
///
/// A decode step of a request with k = length + 1 window entries (the current token included):
///  - window not full: y = exp(L_k) (R C_k) + sum_j coef_j (B_j . C_k) x_j + D x_k, from the
///    read copy R and the window; the token is appended; no state is written;
///  - window full (flush): S = exp(L_k) S_c + sum_j coef_j x_j B_j^T is written to the
///    checkpoint (and the read copy), y = S C_k + D x_k, the window is emptied.
/// The conventional write-back step is the flush of a window of one. A verify step of T
/// drafts is the same with T queries: draft t sees the checkpoint (or read copy), the window
/// and drafts 0..t, the state is read once for all of them, and the committed entries are
/// flushed first when the drafts would not fit after them (the drafts then read the state
/// as the flush stored it, as read steps do).
#pragma once

#include <cstddef>
#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/mamba2/recurrence.hpp"
#include "replayssm/numeric/activation.hpp"
#include "replayssm/numeric/math.hpp"
#include "replayssm/numeric/philox.hpp"
#include "replayssm/policy/policy.hpp"
#include "replayssm/replay/cursor.hpp"
#include "replayssm/replay/executor.hpp"
#include "replayssm/replay/scalar_decay.hpp"
#include "replayssm/replay/state_view.hpp"
#include "replayssm/replay/step_plan.hpp"

namespace replayssm {

/// One head's inputs and outputs for a step of `tokens` tokens (one for a decode step; the
/// drafts of a verify step), with the activations of the head and its group.
template <class Act>
struct mamba2_head_inputs {
  token_rows<const Act> x;   ///< [tokens][P]
  token_rows<const Act> z;   ///< [tokens][P] gate; null data when ungated
  token_rows<Act> y;         ///< [tokens][P] outputs
  token_rows<const Act> B;   ///< [tokens][N] of the head's group
  token_rows<const Act> C;   ///< [tokens][N] of the head's group
  token_rows<const Act> dt;  ///< raw step size of token t at dt.at(t)[0]
  int32_t tokens = 1;
  float A = 0.0f;
  float D = 0.0f;
  float dt_bias = 0.0f;
  bool dt_softplus = true;
};

/// One head's recurrent state: checkpoint, read copy, window entries and cursor.
template <class Policy, class Act>
struct mamba2_head_state {
  using policy = Policy;
  /// A flush folds the token that fills the window: its output is a sum over the new state.
  static constexpr bool flush_folds_token = true;
  state_head_view<typename Policy::checkpoint_format> checkpoint;
  /// Where a flush reads the checkpoint when that differs from where it writes it (the
  /// snapshot baseline of speculative decoding); null data: `checkpoint` itself.
  state_head_view<typename Policy::checkpoint_format> checkpoint_source;
  state_head_view<typename Policy::read_format> read_copy;  ///< unused in shared mode
  Act* window_x = nullptr;                                  ///< ring slot i at window_x + i * window_x_stride, P values
  int64_t window_x_stride = 0;
  Act* window_B = nullptr;  ///< ring slot i of the head's group at window_B + i * window_B_stride
  int64_t window_B_stride = 0;
  float* window_dt = nullptr;  ///< ring slot i at window_dt[i * window_dt_stride]
  int64_t window_dt_stride = 0;
  /// Ring slots of the window buffers: the policy's window for decode steps; verify steps
  /// need window + tokens (a flushing verify appends while other heads of the group still
  /// read the flushed entries' B).
  int32_t window_entries = Policy::window;
  replay_cursor* cursor = nullptr;  ///< may be null only for nearest-even write-back
  int32_t phase = 0;                ///< the first window holds window - phase steps
  bool appends_key = false;         ///< true on one head per group: it appends B
  random_stream_key key{};          ///< flush_index is taken from the cursor
};

namespace detail {

/// Whether a step stages its tokens' x and z in scratch with C for the outputs and the
/// append. A replay step does: loaded at its end, they added a memory latency to every
/// block. The write-back step does not: it has no latency to hide there, and the staging
/// only cost it time (docs/benchmarks.md, "Design measurements").
template <class Policy>
inline constexpr bool stages_token_inputs = !Policy::is_writeback;

}  // namespace detail

/// Shared scratch of a head step, in floats, carved from one buffer (CUB's TempStorage idea
/// with run-time sizes: ask `bytes()`, pass a buffer that large).
template <class Policy>
struct mamba2_scratch_layout {
  static constexpr int window = Policy::window;
  /// Rows are padded to a multiple of this (the largest rows_per_item).
  static constexpr int row_block = 8;
  /// Rows one work item handles: 32 state values in registers, so that each thread has
  /// several independent loads in flight (fewer rows left a read step well short of the
  /// bandwidth).
  template <int K>
  static constexpr int rows_per_item = K >= 16 ? 2 : (K >= 8 ? 4 : 8);
  /// A work item covers units of a row: whole chunks of every format it reads or writes
  /// (contiguous), at least 8 elements (two fp32 units), so that a row has at most N / 8
  /// partial sums per token (with one fp32 chunk per item, a verify step's partial sums
  /// filled shared memory and left few blocks per SM). An item's units lie `columns` units
  /// apart, so that each load of a warp reads consecutive memory.
  template <int Unit>
  static constexpr int item_width = Unit < 8 ? 8 : Unit;
  /// Unit and item width of a read step (the read copy, or the checkpoint in shared mode,
  /// where the two formats are one).
  using read_format = typename Policy::read_format;
  static constexpr int read_unit = read_format::chunk_elems;
  static constexpr int read_width = item_width<read_unit>;
  /// Rows of a read step's work item: about 128 stored bytes, at most row_block rows. A read
  /// item fetches all its bytes before it decodes any, so a thread has as many bytes in
  /// flight in every format (at 4 rows whatever the width, an fp16 read step was no faster
  /// than an fp32 one).
  static constexpr int read_row_bytes = read_width / read_unit * read_format::data_bytes_per_chunk;
  static constexpr int read_rows =
      128 / read_row_bytes < 1 ? 1 : (128 / read_row_bytes > row_block ? row_block : 128 / read_row_bytes);
  /// Unit and item width of a flush: it writes the checkpoint and a separate read copy.
  static constexpr int flush_unit =
      Policy::shared_state || Policy::checkpoint_format::chunk_elems > Policy::read_format::chunk_elems
          ? Policy::checkpoint_format::chunk_elems
          : Policy::read_format::chunk_elems;
  static constexpr int flush_width = item_width<flush_unit>;
  static constexpr int min_width = read_width < flush_width ? read_width : flush_width;
  /// Entries a step can see: a full window plus the step's tokens.
  int32_t entries, tokens;
  int32_t padded_rows, partial_stride, log_decay, scale, flush_coef, query_coef, query_decay, C, token_x, token_z,
      partial, xw, Bw, bc_partial, weight, window_sum, total;

  /// The layout of a step of up to `tokens` tokens (1 for decode steps).
  REPLAYSSM_HOST_DEVICE static mamba2_scratch_layout make(mamba2_layer_shape s, int32_t tokens = 1) {
    mamba2_scratch_layout l{};
    l.tokens = tokens;
    l.entries = window + tokens;
    l.padded_rows = (s.head_dim + row_block - 1) / row_block * row_block;
    // Odd, so that the per-row sums (one thread per row) read distinct banks: a stride of
    // 32 floats put every row on one bank.
    l.partial_stride = s.state_dim / min_width + 1;
    int32_t at = 0;
    auto take = [&at](int32_t n) {
      const int32_t start = at;
      at += (n + 3) / 4 * 4;  // 16-byte aligned regions for vector reads
      return start;
    };
    const int32_t E = l.entries, T = tokens;
    l.log_decay = take(E);
    l.scale = take(E);
    l.flush_coef = take(E + 1);
    l.query_coef = take(T * E);
    l.query_decay = take(T);
    l.C = take(T * s.state_dim);
    const int32_t staged_tokens = detail::stages_token_inputs<Policy> ? T : 0;
    l.token_x = take(staged_tokens * l.padded_rows);
    l.token_z = take(staged_tokens * l.padded_rows);
    l.partial = take(T * l.padded_rows * l.partial_stride);
    // Entry x: coef_j x_j for the flushed entries, x_j for the others.
    l.xw = take(E * l.padded_rows);
    l.Bw = take(E * s.state_dim);
    l.bc_partial = take(T * E * (s.state_dim / 16));
    l.weight = take(T * E);
    l.window_sum = take(T * l.padded_rows);
    l.total = at;
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

/// Element offset in a row of unit u of item `col`, of `columns` items per row.
template <int Unit>
REPLAYSSM_HOST_DEVICE int32_t unit_offset(int u, int32_t col, int32_t columns) {
  return (u * columns + col) * Unit;
}

/// Dot product of an item's values (its units in order) with a row vector `q`.
template <int Unit, int Width>
REPLAYSSM_HOST_DEVICE float dot_item(const float (&s)[Width], const float* q, int32_t col, int32_t columns) {
  float acc = 0.0f;
  REPLAYSSM_UNROLL
  for (int u = 0; u < Width / Unit; ++u) {
    float qu[Unit];
    load_scratch(q + unit_offset<Unit>(u, col, columns), qu);
    for (int e = 0; e < Unit; ++e) acc = math::fma(s[u * Unit + e], qu[e], acc);
  }
  return acc;
}

/// x or z of token t at row p: the staged copy at `staged` (stride padded_rows) when the
/// policy stages them, else from memory.
template <class Policy, class Act>
REPLAYSSM_HOST_DEVICE float token_input(const token_rows<const Act>& rows, const float* staged, int32_t Pp, int32_t t,
                                        int32_t p) {
  if constexpr (stages_token_inputs<Policy>)
    return staged[t * Pp + p];
  else
    return load_act(rows.at(t), p);
}

/// x, B and dt of entry j: a window ring slot for j < length, else a step token.
template <class Policy, class Act>
struct entry_rows {
  const mamba2_head_inputs<Act>& in;
  const mamba2_head_state<Policy, Act>& st;
  const step_plan& plan;
  REPLAYSSM_HOST_DEVICE const Act* x(int32_t j) const {
    return j < plan.length ? st.window_x + plan.ring_slot(j) * st.window_x_stride : in.x.at(j - plan.length);
  }
  REPLAYSSM_HOST_DEVICE const Act* B(int32_t j) const {
    return j < plan.length ? st.window_B + plan.ring_slot(j) * st.window_B_stride : in.B.at(j - plan.length);
  }
  REPLAYSSM_HOST_DEVICE float dt(int32_t j) const {
    return j < plan.length ? st.window_dt[plan.ring_slot(j) * st.window_dt_stride]
                           : mamba2::step_size(to_float(in.dt.at(j - plan.length)[0]), in.dt_bias, in.dt_softplus);
  }
};

}  // namespace detail

/// Stages every entry's step size, log decay and x, each token's C, then the coefficients:
/// of the flushed entries in the new checkpoint, and of the entries each token's output sees.
template <class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE void stage_coefficients(const Exec& ex, const mamba2_head_inputs<Act>& in,
                                              const mamba2_head_state<Policy, Act>& st, mamba2_layer_shape shape,
                                              const step_plan& plan, const mamba2_scratch_layout<Policy>& l,
                                              float* scratch) {
  const detail::entry_rows<Policy, Act> entry{in, st, plan};
  const int32_t m = plan.entries(), N = shape.state_dim, Pp = l.padded_rows, E = l.entries;
  ex.for_each(m, [&](int j) {
    const float dt = entry.dt(j);
    scratch[l.scale + j] = dt;
    scratch[l.log_decay + j] = mamba2::log_decay(dt, in.A);
  });
  // Loops over tokens stay outside the parallel loops: a decode step's single token then
  // needs no index arithmetic.
  for (int32_t t = 0; t < plan.tokens; ++t)
    ex.for_each(N, [&](int n) { scratch[l.C + t * N + n] = detail::load_act(in.C.at(t), n); });
  if constexpr (detail::stages_token_inputs<Policy>) {
    const bool gated = in.z.data != nullptr;
    for (int32_t t = 0; t < plan.tokens; ++t)
      ex.for_each(shape.head_dim, [&](int p) {
        scratch[l.token_x + t * Pp + p] = detail::load_act(in.x.at(t), p);
        scratch[l.token_z + t * Pp + p] = gated ? detail::load_act(in.z.at(t), p) : 0.0f;
      });
  }
  // Entry x (rows padded with zeros) is staged here, in the same memory latency: reading it
  // per row in the window sum serialized one latency per entry.
  ex.for_each(m * Pp, [&](int i) {
    const int j = i / Pp, p = i % Pp;
    scratch[l.xw + i] = p < shape.head_dim ? detail::load_act(entry.x(j), p) : 0.0f;
  });
  ex.sync();
  const int32_t F = plan.folded;
  if (plan.writes_checkpoint) {
    ex.for_each(F + 1, [&](int j) {
      scratch[l.flush_coef + j] = j < F ? window_coefficient(scratch + l.log_decay, scratch + l.scale, j, F)
                                        : checkpoint_decay(scratch + l.log_decay, F);
    });
  }
  // Token t (entry L + t) sees the new checkpoint decayed over entries F .. L + t, and those
  // entries with their coefficients.
  for (int32_t t = 0; t < plan.tokens; ++t) {
    const int32_t last = plan.length + t;
    ex.for_each(last + 1 - F, [&](int i) {
      scratch[l.query_coef + t * E + i] = window_coefficient(scratch + l.log_decay, scratch + l.scale, F + i, last + 1);
    });
  }
  ex.for_each(plan.tokens, [&](int t) {
    scratch[l.query_decay + t] = math::exp(suffix_log_decay(scratch + l.log_decay, F - 1, plan.length + t + 1));
  });
  ex.sync();
}

/// Flush: forms the state after the first F entries, writes the checkpoint (and a separate
/// read copy) through the policy's formats and rounding, and, when the outputs come from it
/// (`outputs_from_flush`), leaves per-item partial sums of S C_t for every token t in
/// scratch. A work item is a few rows by `flush_width` columns. Ends without a barrier.
template <class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE void flush_rows(const Exec& ex, const mamba2_head_inputs<Act>& in,
                                      const mamba2_head_state<Policy, Act>& st, mamba2_layer_shape shape,
                                      const step_plan& plan, const mamba2_scratch_layout<Policy>& l, float* scratch) {
  using ckpt_format = typename Policy::checkpoint_format;
  using read_format = typename Policy::read_format;
  constexpr int Kc = ckpt_format::chunk_elems;
  constexpr int Kr = read_format::chunk_elems;
  constexpr int U = mamba2_scratch_layout<Policy>::flush_unit;
  constexpr int KI = mamba2_scratch_layout<Policy>::flush_width;
  constexpr int R = mamba2_scratch_layout<Policy>::template rows_per_item<KI>;
  const int32_t P = shape.head_dim, N = shape.state_dim, Pp = l.padded_rows, F = plan.folded;
  const detail::entry_rows<Policy, Act> entry{in, st, plan};

  // Scale the staged x_j by coef_j and stage B_j as floats.
  ex.for_each(F * Pp, [&](int i) { scratch[l.xw + i] = weighted_value(scratch[l.flush_coef + i / Pp], scratch[l.xw + i]); });
  ex.for_each(F * N, [&](int i) { scratch[l.Bw + i] = detail::load_act(entry.B(i / N), i % N); });
  ex.sync();

  const auto& source = st.checkpoint_source.data != nullptr ? st.checkpoint_source : st.checkpoint;
  const float total = scratch[l.flush_coef + F];
  const int32_t columns = N / KI;
  random_stream_key key = st.key;
  key.flush_index = plan.flush_count;
  // The tokens whose outputs read the state formed here, before it is stored.
  const int32_t queries = outputs_from_flush(plan) ? plan.tokens : 0;
  ex.for_each(Pp / R * columns, [&](int item) {
    const int32_t r0 = item / columns * R, col = item % columns;
    auto offset = [&](int u) { return detail::unit_offset<U>(u, col, columns); };
    float s[R][KI];
    for (int r = 0; r < R; ++r) {
      for (int u = 0; u < KI / U; ++u) {
        for (int q = 0; q < U / Kc; ++q) {
          float chunk[Kc] = {};
          if (r0 + r < P) source.load(((r0 + r) * N + offset(u)) / Kc + q, chunk);
          for (int e = 0; e < Kc; ++e) s[r][u * U + q * Kc + e] = decayed_checkpoint(total, chunk[e]);
        }
      }
    }
    for (int j = 0; j < F; ++j) {
      float x[R];
      load_scratch(scratch + l.xw + j * Pp + r0, x);
      REPLAYSSM_UNROLL
      for (int u = 0; u < KI / U; ++u) {
        float b[U];
        load_scratch(scratch + l.Bw + j * N + offset(u), b);
        for (int r = 0; r < R; ++r)
          for (int e = 0; e < U; ++e) s[r][u * U + e] = fold_entry(s[r][u * U + e], x[r], b[e]);
      }
    }
    REPLAYSSM_UNROLL
    for (int r = 0; r < R; ++r) {
      if (r0 + r >= P) break;
      for (int t = 0; t < queries; ++t)
        scratch[l.partial + (t * Pp + r0 + r) * l.partial_stride + col] =
            detail::dot_item<U>(s[r], scratch + l.C + t * N, col, columns);
      REPLAYSSM_UNROLL
      for (int u = 0; u < KI / U; ++u) {
        REPLAYSSM_UNROLL
        for (int q = 0; q < U / Kc; ++q) {
          float chunk[Kc];
          for (int e = 0; e < Kc; ++e) chunk[e] = s[r][u * U + q * Kc + e];
          st.checkpoint.template store<typename Policy::rounding>(((r0 + r) * N + offset(u)) / Kc + q, chunk, key);
        }
        if constexpr (!Policy::shared_state) {
          // A separate read copy rounds to nearest: its error is never fed back into the
          // recurrence, so stochastic rounding only adds variance (when the read copy still
          // rounded stochastically, the precision study measured 1.4x the output error).
          REPLAYSSM_UNROLL
          for (int q = 0; q < U / Kr; ++q) {
            float chunk[Kr];
            for (int e = 0; e < Kr; ++e) chunk[e] = s[r][u * U + q * Kr + e];
            st.read_copy.template store<round_nearest_even>(((r0 + r) * N + offset(u)) / Kr + q, chunk, key);
          }
        }
      }
    }
  });
}

/// Read: per-item partial sums of R C_t from the read copy for every token t, the state
/// read once for all of them. Ends without a barrier.
template <class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE void read_rows(const Exec& ex, const mamba2_head_state<Policy, Act>& st, mamba2_layer_shape shape,
                                     const step_plan& plan, const mamba2_scratch_layout<Policy>& l, float* scratch) {
  using layout = mamba2_scratch_layout<Policy>;
  using read_format = typename layout::read_format;
  constexpr int Kr = read_format::chunk_elems;
  constexpr int KR = layout::read_width;
  constexpr int R = layout::read_rows;
  const int32_t P = shape.head_dim, N = shape.state_dim, Pp = l.padded_rows, columns = N / KR;
  const auto& view = [&]() -> const auto& {
    if constexpr (Policy::shared_state)
      return st.checkpoint;
    else
      return st.read_copy;
  }
  ();
  ex.for_each(Pp / R * columns, [&](int item) {
    const int32_t r0 = item / columns * R, col = item % columns;
    stored_chunk<read_format> stored[R][KR / Kr];
    REPLAYSSM_UNROLL
    for (int r = 0; r < R; ++r) {
      REPLAYSSM_UNROLL
      for (int u = 0; u < KR / Kr; ++u)
        if (r0 + r < P) stored[r][u] = view.fetch(((r0 + r) * N + detail::unit_offset<Kr>(u, col, columns)) / Kr);
    }
    REPLAYSSM_UNROLL
    for (int r = 0; r < R; ++r) {
      if (r0 + r >= P) break;
      float s[KR];
      REPLAYSSM_UNROLL
      for (int u = 0; u < KR / Kr; ++u) {
        float chunk[Kr];
        view.decode(stored[r][u], chunk);
        for (int e = 0; e < Kr; ++e) s[u * Kr + e] = chunk[e];
      }
      for (int t = 0; t < plan.tokens; ++t)
        scratch[l.partial + (t * Pp + r0 + r) * l.partial_stride + col] =
            detail::dot_item<Kr>(s, scratch + l.C + t * N, col, columns);
    }
  });
}

/// The window term of every token t, first part: the B_j . C_t partial sums, per 16
/// columns, of the entries it sees. Issued before the state pass and without a barrier, so
/// that their loads overlap the state's (placed after it, the read step took 18% longer).
template <class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE void window_dots(const Exec& ex, const mamba2_head_inputs<Act>& in,
                                       const mamba2_head_state<Policy, Act>& st, mamba2_layer_shape shape,
                                       const step_plan& plan, const mamba2_scratch_layout<Policy>& l, float* scratch) {
  const detail::entry_rows<Policy, Act> entry{in, st, plan};
  const int32_t N = shape.state_dim, E = l.entries, blocks16 = N / 16;
  // Each thread reads 16 consecutive elements of B from global memory: ncu counts most of
  // the sectors as excess, but staging B in shared memory instead (consecutive threads on
  // consecutive elements) was slower, on bank conflicts.
  for (int32_t t = 0; t < plan.tokens; ++t) {
    ex.for_each(entries_seen(plan, t) * blocks16, [&](int i) {
      const int32_t e = i / blocks16, cb = i % blocks16;
      scratch[l.bc_partial + t * E * blocks16 + i] =
          detail::dot16(entry.B(plan.folded + e) + cb * 16, scratch + l.C + t * N + cb * 16);
    });
  }
}

/// The window term of every token t, second part: sum over the entries j it sees of
/// coef_tj (B_j . C_t) x_j per row. Starts with a barrier (after the state pass).
template <class Policy, class Exec>
REPLAYSSM_HOST_DEVICE void window_sums(const Exec& ex, mamba2_layer_shape shape, const step_plan& plan,
                                       const mamba2_scratch_layout<Policy>& l, float* scratch) {
  const int32_t Pp = l.padded_rows, E = l.entries, F = plan.folded, blocks16 = shape.state_dim / 16;
  ex.sync();
  for (int32_t t = 0; t < plan.tokens; ++t) {
    ex.for_each(entries_seen(plan, t), [&](int e) {
      const int32_t i = t * E + e;
      float bc = 0.0f;
      for (int cb = 0; cb < blocks16; ++cb) bc = math::add(bc, scratch[l.bc_partial + i * blocks16 + cb]);
      scratch[l.weight + i] = math::mul(scratch[l.query_coef + i], bc);
    });
  }
  ex.sync();
  for (int32_t t = 0; t < plan.tokens; ++t) {
    ex.for_each(Pp, [&](int p) {
      float acc = 0.0f;
      for (int32_t e = 0; e < entries_seen(plan, t); ++e)
        acc = math::fma(scratch[l.weight + t * E + e], scratch[l.xw + (F + e) * Pp + p], acc);
      scratch[l.window_sum + t * Pp + p] = acc;
    });
  }
  ex.sync();
}

/// Writes every token's y from the staged partial sums: the new checkpoint (after a flush)
/// or the read copy, decayed to the token, plus its window term.
template <class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE void write_outputs(const Exec& ex, const mamba2_head_inputs<Act>& in, mamba2_layer_shape shape,
                                         const step_plan& plan, const mamba2_scratch_layout<Policy>& l,
                                         const float* scratch) {
  using layout = mamba2_scratch_layout<Policy>;
  const int32_t P = shape.head_dim, Pp = l.padded_rows,
                columns = shape.state_dim / (outputs_from_flush(plan) ? layout::flush_width : layout::read_width);
  for (int32_t t = 0; t < plan.tokens; ++t)
    ex.for_each(P, [&](int p) {
      const int32_t row = t * Pp + p;
      float state_term = 0.0f;
      for (int c = 0; c < columns; ++c)
        state_term = math::add(state_term, scratch[l.partial + row * l.partial_stride + c]);
      state_term = math::mul(scratch[l.query_decay + t], state_term);
      const bool gated = in.z.data != nullptr;
      const float x = detail::token_input<Policy>(in.x, scratch + l.token_x, Pp, t, p);
      const float z = gated ? detail::token_input<Policy>(in.z, scratch + l.token_z, Pp, t, p) : 0.0f;
      in.y.at(t)[p] = from_float<Act>(mamba2::output(state_term, scratch[l.window_sum + row], in.D, x, z, gated));
    });
}

/// Appends the step's tokens after the committed entries (x, dt, and B on the group's
/// appending head), unless a flush folded them into the checkpoint.
template <class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE void append_tokens(const Exec& ex, const mamba2_head_inputs<Act>& in,
                                         const mamba2_head_state<Policy, Act>& st, mamba2_layer_shape shape,
                                         const step_plan& plan, const mamba2_scratch_layout<Policy>& l,
                                         const float* scratch) {
  if (plan.folded == plan.entries()) return;
  const int32_t P = shape.head_dim, N = shape.state_dim, L = plan.length;
  for (int32_t t = 0; t < plan.tokens; ++t) {
    Act* x = st.window_x + plan.ring_slot(L + t) * st.window_x_stride;
    ex.for_each(P, [&](int p) {
      x[p] = from_float<Act>(detail::token_input<Policy>(in.x, scratch + l.token_x, l.padded_rows, t, p));
    });
    if (st.appends_key) {
      Act* B = st.window_B + plan.ring_slot(L + t) * st.window_B_stride;
      ex.for_each(N, [&](int n) { B[n] = in.B.at(t)[n]; });
    }
  }
  ex.for_each(plan.tokens,
              [&](int t) { st.window_dt[plan.ring_slot(L + t) * st.window_dt_stride] = scratch[l.scale + L + t]; });
}

/// One step of one head: plan, stage, flush or read, outputs, window and cursor. A decode
/// step takes one token, committed; a verify step (`Kind = step_kind::verify`) takes the
/// drafts, each output from the checkpoint, the window and the drafts before it, and appends
/// them uncommitted (scratch: `mamba2_scratch_layout<Policy>::make(shape, in.tokens)`).
/// Returns the step's error bits; on an error nothing is written.
template <step_kind Kind = step_kind::decode, class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE uint32_t mamba2_head_step(const Exec& ex, const mamba2_head_inputs<Act>& in,
                                                const mamba2_head_state<Policy, Act>& st, mamba2_layer_shape shape,
                                                float* scratch) {
  const step_plan plan = plan_step<Kind>(st, in.tokens);
  if (plan.error != step_ok) return plan.error;
  const auto l = mamba2_scratch_layout<Policy>::make(shape, plan.tokens);
  stage_coefficients(ex, in, st, shape, plan, l, scratch);
  window_dots(ex, in, st, shape, plan, l, scratch);
  if (plan.writes_checkpoint) flush_rows(ex, in, st, shape, plan, l, scratch);
  if (!outputs_from_flush(plan)) {
    if (plan.writes_checkpoint) ex.sync();  // the drafts read the state the flush stored
    read_rows(ex, st, shape, plan, l, scratch);
  }
  window_sums(ex, shape, plan, l, scratch);
  write_outputs(ex, in, shape, plan, l, scratch);
  append_tokens(ex, in, st, shape, plan, l, scratch);
  if (st.cursor != nullptr && ex.leader()) *st.cursor = next_cursor(plan, Kind);
  return step_ok;
}

}  // namespace replayssm
