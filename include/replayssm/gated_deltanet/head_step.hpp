// SPDX-License-Identifier: Apache-2.0
/// \file head_step.hpp
/// The replay primitives for one Gated DeltaNet value head of one request, written
/// once for an executor (replay/executor.hpp): the CPU path runs them serially, a CUDA block
/// runs them with its threads. The plan, the cursor, the policies and the state formats are
/// those of Mamba-2 (replay/step_plan.hpp); what differs is the delta rule's correction u,
/// which needs the state applied to the step's own key.
///
/// A step works one state row (one value channel p) at a time, the row's K values in
/// registers, so that everything a row needs from the state (S k for u, S q for the output)
/// is a dot product over the row:
///  - fold: a flush folds the window's entries into the row and writes the checkpoint (and
///    read copy). Stored u (`corrected_values`) folds in closed form, as Mamba-2 folds
///    (replay/scalar_decay.hpp): S = exp(G) S + sum_j exp(decay j -> end) u_j k_j^T, one
///    multiply-add per entry and element; the `raw_inputs` mode recomputes each u_j from the
///    row, entry by entry, S = exp(g_j) S + u_j k_j^T. Under the write-back policy (a window
///    of one) a decode step folds its token too, with u from the row itself, as conventional
///    decoding does. A replay decode step whose token fills the window folds the committed
///    entries only (`gdn_flush_folds_token`): its token stays open, read from the new row
///    before it is rounded, and opens the next window.
///  - open tokens (not folded): with R the read copy (as a verify step's flush stored it),
///        S_{t-1} k_t = exp(G) R k_t + sum_e exp(G_e) (k_e . k_t) u_e
///        u_t = beta_t (v_t - exp(g_t) S_{t-1} k_t)
///        o_t = exp(G') R q_t + sum_{e <= t} exp(G'_e) (k_e . q_t) u_e
///    where the coefficients (decays times key dot products) do not depend on the row and
///    are staged once per head. Open tokens enter the window as (u, k, g), and in the
///    `raw_inputs` mode also (v, beta).
///
/// A row is held by `Exec::row_lanes` work items (one or four threads on a CUDA block, one on
/// the CPU), each with its share of the columns; their dot products meet in `row_sum`, in an
/// order that gives the same bits either way. State layout: `gdn_state_chunk`.
#pragma once

#include <cstddef>
#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/gated_deltanet/inputs.hpp"
#include "replayssm/gated_deltanet/recurrence.hpp"
#include "replayssm/numeric/activation.hpp"
#include "replayssm/numeric/math.hpp"
#include "replayssm/numeric/philox.hpp"
#include "replayssm/policy/policy.hpp"
#include "replayssm/replay/cursor.hpp"
#include "replayssm/replay/scalar_decay.hpp"
#include "replayssm/replay/state_view.hpp"
#include "replayssm/replay/step_plan.hpp"

namespace replayssm {

/// Largest key dimension: a work item holds a whole state row in registers.
inline constexpr int32_t gdn_max_key_dim = 128;

/// Columns of a row block, the unit in which a state row is split between the lanes that
/// share it (a multiple of every built-in format's chunk).
inline constexpr int32_t gdn_column_block = 16;

/// Chunk index, in a value head's view, of chunk `unit` (columns [unit K_c, unit K_c + K_c)
/// for a format of K_c-element chunks) of row `row` of a state with `rows` rows: a chunk's
/// rows lie next to each other, so that the rows of consecutive threads are consecutive
/// memory. (Rows stored whole in 64-column groups left the loads of a thread per row
/// uncoalesced.)
REPLAYSSM_HOST_DEVICE constexpr int32_t gdn_state_chunk(int32_t row, int32_t unit, int32_t rows) {
  return unit * rows + row;
}

/// One value head's inputs and outputs for a step of `tokens` tokens.
template <class Act>
struct gdn_head_inputs {
  token_rows<const Act> q;  ///< [tokens][K] of the head's key head, before normalization
  token_rows<const Act> k;  ///< [tokens][K] of the head's key head, before normalization
  token_rows<const Act> v;  ///< [tokens][V]
  token_rows<Act> o;        ///< [tokens][V] outputs
  token_rows<const Act> a;  ///< raw decay projection of token t at a.at(t)[0]
  token_rows<const Act> b;  ///< raw write-strength projection of token t at b.at(t)[0]
  int32_t tokens = 1;
  float A_log = 0.0f;
  float dt_bias = 0.0f;
};

/// One value head's recurrent state: checkpoint, read copy, window entries and cursor.
template <class Policy, class Act>
struct gdn_head_state {
  using policy = Policy;
  static constexpr bool flush_folds_token = gdn_flush_folds_token<Policy>;  ///< (`flush_folds_token`)
  state_head_view<typename Policy::checkpoint_format> checkpoint;
  /// Where a flush reads the checkpoint when that differs from where it writes it (the
  /// snapshot baseline); null data: `checkpoint` itself.
  state_head_view<typename Policy::checkpoint_format> checkpoint_source;
  state_head_view<typename Policy::read_format> read_copy;  ///< unused in shared mode
  float* window_u = nullptr;                                ///< ring slot i at window_u + i * window_u_stride, V values
  int64_t window_u_stride = 0;
  float* window_k = nullptr;  ///< ring slot i of the key head, K normalized values
  int64_t window_k_stride = 0;
  float* window_g = nullptr;  ///< log decay of ring slot i at window_g[i * window_g_stride]
  int64_t window_g_stride = 0;
  Act* window_v = nullptr;  ///< raw_inputs only: ring slot i's V values
  int64_t window_v_stride = 0;
  float* window_beta = nullptr;  ///< raw_inputs only: write strength of ring slot i
  int64_t window_beta_stride = 0;
  int32_t window_entries = Policy::window;  ///< ring slots (window + tokens for verify steps)
  replay_cursor* cursor = nullptr;          ///< may be null only for nearest-even write-back
  int32_t phase = 0;                        ///< the first window holds window - phase steps
  bool appends_key = false;                 ///< true on one value head per key head: it appends k
  random_stream_key key{};                  ///< flush_index is taken from the cursor
};

/// Shared scratch of a Gated DeltaNet head step, in floats (ask `bytes()`).
struct gdn_scratch_layout {
  int32_t tokens, entries;
  int32_t keys, queries, window_u, log_decay, decay, beta, fold_coef, state_decay, key_coef, query_coef, norm, total;

  /// The layout of a step of up to `tokens` tokens under a policy of window `window`.
  REPLAYSSM_HOST_DEVICE static gdn_scratch_layout make(gdn_layer_shape s, int32_t window, int32_t tokens = 1) {
    gdn_scratch_layout l{};
    l.tokens = tokens;
    l.entries = window + tokens;
    int32_t at = 0;
    auto take = [&at](int32_t n) {
      const int32_t start = at;
      at += (n + 3) / 4 * 4;
      return start;
    };
    const int32_t E = l.entries, T = tokens, K = s.key_dim;
    l.keys = take(E * K);     // normalized key of every entry the step sees
    l.queries = take(T * K);  // normalized, scaled query of every token
    // u of the window's entries, every row: staged with the keys, in one memory latency; read
    // per row in the row pass, they added a latency per entry.
    l.window_u = take(E * s.value_dim);
    l.log_decay = take(E);
    l.decay = take(E);  // exp(log decay), once per entry rather than per row and lane
    l.beta = take(E);
    // The closed-form fold of the window's stored u: entry j's coefficient exp(decay j -> L)
    // at j < L, the checkpoint's decay over the window at L.
    l.fold_coef = take(E + 1);
    l.state_decay = take(T);     // decay of the state from the folded entries to open token t
    l.key_coef = take(T * E);    // exp(G_e) (k_e . k_t) per open token t and entry e
    l.query_coef = take(T * E);  // exp(G'_e) (k_e . q_t)
    l.norm = take(2 * l2_normalize_scratch(K));
    l.total = at;
    return l;
  }
  /// Scratch bytes a head step needs.
  REPLAYSSM_HOST_DEVICE size_t bytes() const { return size_t(total) * sizeof(float); }
};

namespace detail {

/// A key-length dot product is four chains of fused multiply-adds, chain j over the row
/// blocks b with b % 4 == j in column order, summed as (0 + 1) + (2 + 3): on one thread or
/// split over a row's four lanes (a chain each), the same bits.
inline constexpr int gdn_dot_chains = 4;

/// A lane's share of the dot product of two K-vectors, in the chain order above: with one
/// lane the whole sum, with four the lane's chain (`row_sum` of the executor completes it).
template <int Lanes>
REPLAYSSM_HOST_DEVICE float partial_dot(const float* a, const float* w, int32_t K, int lane) {
  constexpr int chains = gdn_dot_chains / Lanes;
  float acc[chains] = {};
  for (int32_t b = lane; b * gdn_column_block < K; b += Lanes)
    for (int e = 0; e < gdn_column_block; ++e) {
      const int32_t c = b * gdn_column_block + e;
      acc[(b / Lanes) % chains] = math::fma(a[c], w[c], acc[(b / Lanes) % chains]);
    }
  if constexpr (chains == 1)
    return acc[0];
  else
    return math::add(math::add(acc[0], acc[1]), math::add(acc[2], acc[3]));
}

/// The part of a state row one of its `Lanes` lanes holds: row blocks lane, lane + Lanes, ...
/// (value i is column (lane + Lanes * (i / 16)) * 16 + i % 16).
template <int Lanes>
struct gdn_row_part {
  static_assert(Lanes == 1 || Lanes == gdn_dot_chains, "gdn_row_part: a row is split over 1 or 4 lanes");
  static constexpr int blocks = gdn_max_key_dim / gdn_column_block / Lanes;
  float v[blocks * gdn_column_block];

  /// The first column of the lane's i-th block.
  REPLAYSSM_HOST_DEVICE static int32_t column(int i, int lane) { return (lane + Lanes * i) * gdn_column_block; }

  /// Loads the lane's blocks of row `row` of a head's state view (zeros past K); any view
  /// with `chunk_elems` and `load(chunk, values)` over chunks in `gdn_state_chunk` order.
  template <class View>
  REPLAYSSM_HOST_DEVICE void load(const View& view, int32_t row, int32_t rows, int32_t K, int lane) {
    constexpr int Kc = View::chunk_elems;
    // Unrolled, so that `v` stays in registers (a 16-bit row part of a warp step went to
    // local memory).
    REPLAYSSM_UNROLL
    for (int i = 0; i < blocks; ++i) {
      REPLAYSSM_UNROLL
      for (int q = 0; q < gdn_column_block / Kc; ++q) {
        float chunk[Kc] = {};
        const int32_t c = column(i, lane) + q * Kc;
        if (c < K) view.load(gdn_state_chunk(row, c / Kc, rows), chunk);
        for (int e = 0; e < Kc; ++e) v[i * gdn_column_block + q * Kc + e] = chunk[e];
      }
    }
  }

  /// Stores the lane's blocks as row `row`, rounding with `Round`.
  template <class Round, class Format>
  REPLAYSSM_HOST_DEVICE void store(const state_head_view<Format>& view, int32_t row, int32_t rows, int32_t K, int lane,
                                   const random_stream_key& key) const {
    constexpr int Kc = Format::chunk_elems;
    REPLAYSSM_UNROLL
    for (int i = 0; i < blocks; ++i) {
      REPLAYSSM_UNROLL
      for (int q = 0; q < gdn_column_block / Kc; ++q) {
        const int32_t c = column(i, lane) + q * Kc;
        if (c >= K) continue;
        float chunk[Kc];
        for (int e = 0; e < Kc; ++e) chunk[e] = v[i * gdn_column_block + q * Kc + e];
        view.template store<Round>(gdn_state_chunk(row, c / Kc, rows), chunk, key);
      }
    }
  }

  /// The lane's share of the dot product with a K-vector `w`: its chains, summed as in gdn_dot
  /// (with four lanes, its one chain). `row_sum` of the executor completes it.
  REPLAYSSM_HOST_DEVICE float partial_dot(const float* w, int32_t K, int lane) const {
    constexpr int chains = gdn_dot_chains / Lanes;
    float acc[chains] = {};
    for (int i = 0; i < blocks; ++i) {
      const int32_t c0 = column(i, lane);
      for (int e = 0; e < gdn_column_block; ++e)
        if (c0 + e < K) acc[i % chains] = math::fma(v[i * gdn_column_block + e], w[c0 + e], acc[i % chains]);
    }
    if constexpr (chains == 1)
      return acc[0];
    else
      return math::add(math::add(acc[0], acc[1]), math::add(acc[2], acc[3]));
  }

  /// Multiplies every value by the decay `a` (`decayed_checkpoint`).
  REPLAYSSM_HOST_DEVICE void scale(float a) {
    for (float& x : v) x = decayed_checkpoint(a, x);
  }
  /// Adds u k^T: value i += u * k[its column] (`fold_entry`).
  REPLAYSSM_HOST_DEVICE void add_outer(float u, const float* k, int32_t K, int lane) {
    for (int i = 0; i < blocks; ++i) {
      const int32_t c0 = column(i, lane);
      for (int e = 0; e < gdn_column_block; ++e)
        if (c0 + e < K) v[i * gdn_column_block + e] = fold_entry(v[i * gdn_column_block + e], u, k[c0 + e]);
    }
  }
};

/// The dot product of a row with a K-vector, completed over the row's lanes.
template <class Exec, int Lanes>
REPLAYSSM_HOST_DEVICE float row_dot(const Exec& ex, const gdn_row_part<Lanes>& s, const float* w, int32_t K, int lane) {
  return ex.row_sum(s.partial_dot(w, K, lane));
}

/// One conventional step on a state row: S = decay S (decay = exp(g)), then S += u k^T with
/// u = beta (v - S k).
template <class Exec, int Lanes>
REPLAYSSM_HOST_DEVICE void fold_row(const Exec& ex, gdn_row_part<Lanes>& s, const float* k, int32_t K, int lane,
                                    float decay, float beta, float v) {
  s.scale(decay);
  s.add_outer(gated_deltanet::corrected_value(beta, v, row_dot(ex, s, k, K, lane)), k, K, lane);
}

/// Stages entry j's log decay, decay and write strength (the window's from the ring, the
/// step's tokens' from their inputs; a window entry's write strength in the `raw_inputs`
/// mode only).
template <class Policy, class Act>
REPLAYSSM_HOST_DEVICE void stage_gdn_entry_scalars(const gdn_head_inputs<Act>& in,
                                                   const gdn_head_state<Policy, Act>& st, const step_plan& plan,
                                                   const gdn_scratch_layout& l, float* scratch, int32_t j) {
  const int32_t L = plan.length;
  const bool token = j >= L;
  const int32_t slot = plan.ring_slot(j);
  const float log_decay = token ? gated_deltanet::log_decay(to_float(in.a.at(j - L)[0]), in.A_log, in.dt_bias)
                                : st.window_g[slot * st.window_g_stride];
  scratch[l.log_decay + j] = log_decay;
  scratch[l.decay + j] = math::exp(log_decay);
  if (token)
    scratch[l.beta + j] = gated_deltanet::write_strength(to_float(in.b.at(j - L)[0]));
  else if constexpr (keeps_raw_inputs<Policy>)
    scratch[l.beta + j] = st.window_beta[slot * st.window_beta_stride];
}

}  // namespace detail

/// Stages the normalized keys of every entry the step sees (the window's from the ring, the
/// tokens' normalized here), every token's normalized, scaled query, the window's u, and every
/// entry's log decay, decay and write strength. Ends with a barrier.
template <class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE void stage_gdn_entries(const Exec& ex, const gdn_head_inputs<Act>& in,
                                             const gdn_head_state<Policy, Act>& st, gdn_layer_shape shape,
                                             const step_plan& plan, const gdn_scratch_layout& l, float* scratch) {
  const int32_t K = shape.key_dim, L = plan.length;
  for (int32_t t = 0; t < plan.tokens; ++t) {
    // q and k together: two barriers per token instead of four.
    float* k_sums = scratch + l.norm;
    float* q_sums = k_sums + l2_normalize_scratch(K);
    l2_partial_sums(ex, in.k.at(t), K, k_sums);
    l2_partial_sums(ex, in.q.at(t), K, q_sums);
    ex.sync();
    l2_scale(ex, in.k.at(t), K, scratch + l.keys + (L + t) * K, k_sums, 1.0f);
    l2_scale(ex, in.q.at(t), K, scratch + l.queries + t * K, q_sums, gated_deltanet::query_scale(K));
    ex.sync();
  }
  ex.for_each(L * K,
              [&](int i) { scratch[l.keys + i] = st.window_k[plan.ring_slot(i / K) * st.window_k_stride + i % K]; });
  const int32_t V = shape.value_dim;
  ex.for_each(
      L * V, [&](int i) { scratch[l.window_u + i] = st.window_u[plan.ring_slot(i / V) * st.window_u_stride + i % V]; });
  ex.for_each(plan.entries(), [&](int j) { detail::stage_gdn_entry_scalars(in, st, plan, l, scratch, j); });
  ex.sync();
}

/// Stages, for every open token t (entry L + t, not folded), the decay of the state since
/// the folded entries and the coefficients of the entries e it sees: exp(decay e -> t)
/// (k_e . k_t) for e before t, exp(decay e -> t) (k_e . q_t) for e up to t. Ends with a barrier.
template <class Exec>
REPLAYSSM_HOST_DEVICE void stage_gdn_coefficients(const Exec& ex, gdn_layer_shape shape, const step_plan& plan,
                                                  const gdn_scratch_layout& l, float* scratch) {
  const int32_t K = shape.key_dim, E = l.entries, F = plan.folded, L = plan.length;
  const float* log_decay = scratch + l.log_decay;
  for (int32_t t = 0; t < plan.tokens && L + t >= F; ++t) {
    const int32_t last = L + t;
    // Each dot product on a row's lanes (same bits as on one thread).
    ex.for_each_row(2 * (last + 1 - F), [&](int i, int lane) {
      const int32_t e = F + i / 2;
      const bool query = i % 2 == 1;
      if (!query && e == last) return;  // u_t does not see itself
      const float* w = query ? scratch + l.queries + t * K : scratch + l.keys + last * K;
      const float dot = ex.row_sum(detail::partial_dot<Exec::row_lanes>(scratch + l.keys + e * K, w, K, lane));
      if (lane == 0)
        scratch[(query ? l.query_coef : l.key_coef) + t * E + e] =
            math::mul(math::exp(suffix_log_decay(log_decay, e, last + 1)), dot);
    });
  }
  ex.for_each(plan.tokens,
              [&](int t) { scratch[l.state_decay + t] = math::exp(suffix_log_decay(log_decay, F - 1, L + t + 1)); });
  if (plan.writes_checkpoint && L > 0)  // the window's entries fold in closed form
    ex.for_each(L + 1, [&](int j) { scratch[l.fold_coef + j] = fold_decay(log_decay, j, L); });
  ex.sync();
}

namespace detail {

/// The flush of state row `p`, loaded into `s` from the checkpoint, by one of its lanes: folds
/// the flushed entries in order (the window's stored u in closed form, recomputed u entry by
/// entry, a decode step's token as conventional decoding folds it, writing its output), then
/// stores the checkpoint and the read copy. `s` keeps the new state, unrounded. The staged
/// entries (`stage_gdn_entries`) and fold coefficients (`stage_gdn_coefficients`) in `scratch`.
template <class Policy, class Act, class Exec, int Lanes>
REPLAYSSM_HOST_DEVICE void flush_row(const Exec& ex, gdn_row_part<Lanes>& s, const gdn_head_inputs<Act>& in,
                                     const gdn_head_state<Policy, Act>& st, gdn_layer_shape shape,
                                     const step_plan& plan, const gdn_scratch_layout& l, const float* scratch,
                                     int32_t p, int lane, const random_stream_key& key) {
  const int32_t V = shape.value_dim, K = shape.key_dim, L = plan.length, F = plan.folded;
  const float* keys = scratch + l.keys;
  // Stored u folds in closed form; recomputed u (tokens, raw_inputs) entry by entry.
  if constexpr (!keeps_raw_inputs<Policy>) {
    if (L > 0) s.scale(scratch[l.fold_coef + L]);
    for (int32_t j = 0; j < L; ++j)
      s.add_outer(weighted_value(scratch[l.fold_coef + j], scratch[l.window_u + j * V + p]), keys + j * K, K, lane);
  }
  for (int32_t j = keeps_raw_inputs<Policy> ? 0 : L; j < F; ++j) {
    const bool token = j >= L;
    float v = 0.0f;
    if (token)
      v = to_float(in.v.at(j - L)[p]);
    else if constexpr (keeps_raw_inputs<Policy>)
      v = to_float(st.window_v[plan.ring_slot(j) * st.window_v_stride + p]);
    fold_row(ex, s, keys + j * K, K, lane, scratch[l.decay + j], scratch[l.beta + j], v);
    if (token) {
      const float o = row_dot(ex, s, scratch + l.queries + (j - L) * K, K, lane);
      if (lane == 0) in.o.at(j - L)[p] = from_float<Act>(o);  // every lane holds it; one writes
    }
  }
  s.template store<typename Policy::rounding>(st.checkpoint, p, V, K, lane, key);
  // A separate read copy rounds to nearest: its error is never fed back (see mamba2).
  if constexpr (!Policy::shared_state) s.template store<round_nearest_even>(st.read_copy, p, V, K, lane, key);
}

/// The open tokens of state row `p` (entries L + t not folded), by one of its lanes, from the
/// row `s` holds (the state their plan's flush formed, or as stored) and the window's u: each
/// token's u (written to the window) and output. Up to `MaxTokens` tokens.
template <int MaxTokens, class Policy, class Act, class Exec, int Lanes>
REPLAYSSM_HOST_DEVICE void open_tokens_row(const Exec& ex, const gdn_row_part<Lanes>& s, const gdn_head_inputs<Act>& in,
                                           const gdn_head_state<Policy, Act>& st, gdn_layer_shape shape,
                                           const step_plan& plan, const gdn_scratch_layout& l, const float* scratch,
                                           int32_t p, int lane) {
  const int32_t V = shape.value_dim, K = shape.key_dim, L = plan.length, F = plan.folded, E = l.entries;
  const float* keys = scratch + l.keys;
  const float* queries = scratch + l.queries;
  const int32_t first = F > L ? F - L : 0;  // the first open token
  if (first >= plan.tokens) return;
  float key_term[MaxTokens] = {}, query_term[MaxTokens] = {}, u[MaxTokens] = {};
  for (int t = 0; t < MaxTokens; ++t) {
    if (t < first || t >= plan.tokens) continue;
    key_term[t] = math::mul(scratch[l.state_decay + t], row_dot(ex, s, keys + (L + t) * K, K, lane));
    query_term[t] = math::mul(scratch[l.state_decay + t], row_dot(ex, s, queries + t * K, K, lane));
  }
  for (int32_t e = F; e < L; ++e) {
    const float ue = scratch[l.window_u + e * V + p];
    for (int t = 0; t < MaxTokens; ++t) {
      if (t >= plan.tokens) continue;
      key_term[t] = math::fma(scratch[l.key_coef + t * E + e], ue, key_term[t]);
      query_term[t] = math::fma(scratch[l.query_coef + t * E + e], ue, query_term[t]);
    }
  }
  for (int t = 0; t < MaxTokens; ++t) {
    if (t < first || t >= plan.tokens) continue;
    for (int i = 0; i < t; ++i) key_term[t] = math::fma(scratch[l.key_coef + t * E + L + i], u[i], key_term[t]);
    u[t] = gated_deltanet::corrected_value(scratch[l.beta + L + t], to_float(in.v.at(t)[p]), key_term[t]);
    for (int i = 0; i <= t; ++i) query_term[t] = math::fma(scratch[l.query_coef + t * E + L + i], u[i], query_term[t]);
    if (lane == 0) {  // every lane holds the row's sums; one writes them
      in.o.at(t)[p] = from_float<Act>(query_term[t]);
      st.window_u[plan.ring_slot(L + t) * st.window_u_stride + p] = u[t];
    }
  }
}

}  // namespace detail

/// The row pass: every state row folds the flushed entries (writing the checkpoint and read
/// copy; `detail::flush_row`), then forms u and the output of every open token
/// (`detail::open_tokens_row`): a decode step's from the state its flush formed, unrounded
/// (the GPU's flush queries it in the same pass), a read step's and a verify step's from the
/// state as stored (a verify step's after its flush: the GPU reads it back in a launch of its
/// own), and the window's u. Writes the outputs and the open tokens' u to the window. Ends
/// without a barrier.
template <step_kind Kind, class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE void gdn_rows(const Exec& ex, const gdn_head_inputs<Act>& in,
                                    const gdn_head_state<Policy, Act>& st, gdn_layer_shape shape, const step_plan& plan,
                                    const gdn_scratch_layout& l, const float* scratch) {
  const int32_t V = shape.value_dim, K = shape.key_dim;
  random_stream_key key = st.key;
  key.flush_index = plan.flush_count;
  // A shared FP32 state is stored exactly: after a flush the row already holds it.
  constexpr bool stored_exactly = Policy::shared_state && Policy::checkpoint_format::is_exact_fp32;
  const bool reads_flushed = plan.writes_checkpoint && (Kind == step_kind::decode || stored_exactly);
  ex.for_each_row(V, [&](int p, int lane) {
    detail::gdn_row_part<Exec::row_lanes> s;
    if (plan.writes_checkpoint) {
      s.load(st.checkpoint_source.data != nullptr ? st.checkpoint_source : st.checkpoint, p, V, K, lane);
      detail::flush_row(ex, s, in, st, shape, plan, l, scratch, p, lane, key);
    }
    if (!reads_flushed) {
      if constexpr (Policy::shared_state)
        s.load(st.checkpoint, p, V, K, lane);
      else
        s.load(st.read_copy, p, V, K, lane);
    }
    // A decode step's one token is a constant: its per-token arrays stay in registers.
    detail::open_tokens_row<Kind == step_kind::decode ? 1 : max_draft_tokens>(ex, s, in, st, shape, plan, l, scratch,
                                                                              p, lane);
  });
}

/// Appends the open tokens' k (on the key head's appending value head), g, and in the
/// `raw_inputs` mode v and beta, after the committed entries.
template <class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE void append_gdn_tokens(const Exec& ex, const gdn_head_inputs<Act>& in,
                                             const gdn_head_state<Policy, Act>& st, gdn_layer_shape shape,
                                             const step_plan& plan, const gdn_scratch_layout& l, const float* scratch) {
  if (plan.folded == plan.entries()) return;
  const int32_t K = shape.key_dim, V = shape.value_dim, L = plan.length;
  for (int32_t t = 0; t < plan.tokens; ++t) {
    const int32_t slot = plan.ring_slot(L + t);
    if (st.appends_key)
      ex.for_each(K, [&](int c) { st.window_k[slot * st.window_k_stride + c] = scratch[l.keys + (L + t) * K + c]; });
    if constexpr (keeps_raw_inputs<Policy>)
      ex.for_each(V, [&](int p) { st.window_v[slot * st.window_v_stride + p] = in.v.at(t)[p]; });
  }
  ex.for_each(plan.tokens, [&](int t) {
    const int32_t slot = plan.ring_slot(L + t);
    st.window_g[slot * st.window_g_stride] = scratch[l.log_decay + L + t];
    if constexpr (keeps_raw_inputs<Policy>) st.window_beta[slot * st.window_beta_stride] = scratch[l.beta + L + t];
  });
}

/// One step of one value head: plan, stage, rows, window and cursor. A decode step takes one
/// token, committed; a verify step (`Kind = step_kind::verify`) takes the drafts and appends
/// them uncommitted (scratch: `gdn_scratch_layout::make(shape, Policy::window, in.tokens)`).
/// Returns the step's error bits; on an error nothing is written.
template <step_kind Kind = step_kind::decode, class Policy, class Act, class Exec>
REPLAYSSM_HOST_DEVICE uint32_t gdn_head_step(const Exec& ex, const gdn_head_inputs<Act>& in,
                                             const gdn_head_state<Policy, Act>& st, gdn_layer_shape shape,
                                             float* scratch) {
  const step_plan plan = plan_step<Kind>(st, in.tokens);
  if (plan.error != step_ok) return plan.error;
  const auto l = gdn_scratch_layout::make(shape, Policy::window, plan.tokens);
  stage_gdn_entries(ex, in, st, shape, plan, l, scratch);
  stage_gdn_coefficients(ex, shape, plan, l, scratch);
  gdn_rows<Kind>(ex, in, st, shape, plan, l, scratch);
  append_gdn_tokens(ex, in, st, shape, plan, l, scratch);
  if (st.cursor != nullptr && ex.leader()) *st.cursor = next_cursor(plan, Kind);
  return step_ok;
}

}  // namespace replayssm
