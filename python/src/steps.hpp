// SPDX-License-Identifier: Apache-2.0
/// \file steps.hpp
/// A step called from Python: its array arguments, checked and bound to the library's params
/// for the policy and activation type chosen at run time, then run by a backend (the CPU
/// launchers of cpu_backend.hpp in cpu_*.cpp, the CUDA launchers of cuda_backend.cuh in
/// cuda_*.cu). The argument names are the
/// params' field names, but for the output: `out`, as the Python functions name it (the
/// params' `y` and `o`).
#pragma once

#include <cstdint>
#include <string>

#include "arrays.hpp"
#include "policies.hpp"

namespace replayssm_python {

/// The arguments every recurrence's steps share (`step_params`). `for_each_array` calls
/// `f(name, array, written)` for each array argument, `for_each_scalar` `f(name, value)` for
/// each scalar one.
struct common_args {
  array slot_indices, token_counts, checkpoint, checkpoint_scales, read_copy, read_copy_scales;
  array cursors, flush_phase, report, request_plans;
  std::string kind = "decode";  ///< the step: decode or verify
  int32_t policy = 0;           ///< an index into `policies`
  int32_t tokens = 1;
  int32_t pad_slot_id = -1;
  uint64_t seed = 0;

  template <class F>
  void for_each_array(F&& f) {
    f("slot_indices", slot_indices, false);
    f("token_counts", token_counts, false);
    f("checkpoint", checkpoint, true);
    f("checkpoint_scales", checkpoint_scales, true);
    f("read_copy", read_copy, true);
    f("read_copy_scales", read_copy_scales, true);
    f("cursors", cursors, true);
    f("flush_phase", flush_phase, false);
    f("report", report, true);
    f("request_plans", request_plans, true);
  }
  template <class F>
  void for_each_scalar(F&& f) {
    f("kind", kind);
    f("policy", policy);
    f("tokens", tokens);
    f("pad_slot_id", pad_slot_id);
    f("seed", seed);
  }
};

/// Names every array of `args` after its argument.
template <class Args>
void name_arrays(Args& args) {
  args.for_each_array([](const char* name, array& a, bool) { a.name = name; });
}

/// A Mamba-2 step's arguments (`mamba2_params`). The layer's shape (`heads` ... `groups`),
/// when given, is what every array is checked against, so that an error names the array at
/// fault; 0: taken from x and B.
struct mamba2_args : common_args {
  static constexpr const char* who = "mamba2";
  array x, z, y, dt, B, C, A, D, dt_bias, window_x, window_B, window_dt;
  bool dt_softplus = true;
  int32_t heads = 0, head_dim = 0, state_dim = 0, groups = 0;

  mamba2_args() { name_arrays(*this); }
  template <class F>
  void for_each_array(F&& f) {
    common_args::for_each_array(f);
    f("x", x, false);
    f("z", z, false);
    f("out", y, true);
    f("dt", dt, false);
    f("B", B, false);
    f("C", C, false);
    f("A", A, false);
    f("D", D, false);
    f("dt_bias", dt_bias, false);
    f("window_x", window_x, true);
    f("window_B", window_B, true);
    f("window_dt", window_dt, true);
  }
  template <class F>
  void for_each_scalar(F&& f) {
    common_args::for_each_scalar(f);
    f("dt_softplus", dt_softplus);
    f("heads", heads);
    f("head_dim", head_dim);
    f("state_dim", state_dim);
    f("groups", groups);
  }
};

/// A Gated DeltaNet step's arguments (`gdn_params`). q, k and v come apart, or packed in one
/// row per token as an engine's projection leaves them (`qkv`). The layer's shape
/// (`value_heads` ... `value_dim`), when given, is what every array is checked against; 0:
/// taken from q and v (a packed qkv needs it).
struct gdn_args : common_args {
  static constexpr const char* who = "gated_deltanet";
  array q, k, v, qkv, o, a, b, A_log, dt_bias, window_u, window_k, window_g, window_v, window_beta;
  bool raw_inputs = false;  ///< the policy's window mode: raw_inputs, else corrected_values
  int32_t value_heads = 0, key_heads = 0, key_dim = 0, value_dim = 0;

  gdn_args() { name_arrays(*this); }
  /// The array whose device the step runs on.
  const array& first() const { return qkv.given() ? qkv : q; }
  template <class F>
  void for_each_array(F&& f) {
    common_args::for_each_array(f);
    f("q", q, false);
    f("k", k, false);
    f("v", v, false);
    f("qkv", qkv, false);
    f("out", o, true);
    f("a", a, false);
    f("b", b, false);
    f("A_log", A_log, false);
    f("dt_bias", dt_bias, false);
    f("window_u", window_u, true);
    f("window_k", window_k, true);
    f("window_g", window_g, true);
    f("window_v", window_v, true);
    f("window_beta", window_beta, true);
  }
  template <class F>
  void for_each_scalar(F&& f) {
    common_args::for_each_scalar(f);
    f("raw_inputs", raw_inputs);
    f("value_heads", value_heads);
    f("key_heads", key_heads);
    f("key_dim", key_dim);
    f("value_dim", value_dim);
  }
};

/// A commit's arguments (`commit_drafts`); cursors are `[num_slots][heads][4]` int32.
struct commit_args {
  static constexpr const char* who = "commit";
  array cursors, accepted_counts, slot_indices, token_counts, report;
  int32_t tokens = 1;
  int32_t pad_slot_id = -1;

  commit_args() { name_arrays(*this); }
  template <class F>
  void for_each_array(F&& f) {
    f("cursors", cursors, true);
    f("accepted_counts", accepted_counts, false);
    f("slot_indices", slot_indices, false);
    f("token_counts", token_counts, false);
    f("report", report, true);
  }
  template <class F>
  void for_each_scalar(F&& f) {
    f("tokens", tokens);
    f("pad_slot_id", pad_slot_id);
  }
};

/// What to run: the step kind, the policy (an index into `policies`) and the CUDA stream
/// (a `cudaStream_t` as an integer).
struct step_call {
  rs::step_kind kind = rs::step_kind::decode;
  int policy = 0;
  uintptr_t stream = 0;
};

/// The call of a step's arguments on `stream`; an error for an unknown kind.
inline rs::status call_of(const common_args& a, uintptr_t stream, step_call& call) {
  if (a.kind != "decode" && a.kind != "verify")
    return rs::status::error("replayssm: unknown step kind '" + a.kind + "' (decode or verify)");
  call = {a.kind == "decode" ? rs::step_kind::decode : rs::step_kind::verify, a.policy, stream};
  return {};
}

// The CPU backend (cpu_*.cpp: one translation unit per recurrence, so that they compile in
// parallel).
rs::status cpu_mamba2_step(const step_call& call, const mamba2_args& args);
rs::status cpu_gdn_step(const step_call& call, const gdn_args& args);

// The CUDA backend (cuda_*.cu), present when the module was built with CUDA.
rs::status cuda_mamba2_step(const step_call& call, const mamba2_args& args);
rs::status cuda_gdn_step(const step_call& call, const gdn_args& args);
rs::status cuda_commit_drafts(const commit_args& args, uintptr_t stream);
rs::status cuda_take_step_errors(const array& report, uintptr_t stream);

namespace detail {

/// Calls `f(tag<Act>{})` for the activation type of `Acts` whose element is `type`; an error
/// naming the compiled ones otherwise.
template <class... Acts, class F>
rs::status visit_activation(type_list<Acts...>, const char* who, const array& first, F&& f) {
  rs::status result;
  bool found = false;
  auto try_one = [&](auto t) {
    using act = typename decltype(t)::type;
    constexpr rs::dtype d = rs::activation_traits<act>::tag;
    const element e = d == rs::dtype::f32 ? element::f32 : d == rs::dtype::f16 ? element::f16 : element::bf16;
    if (found || e != first.type) return;
    found = true;
    result = f(t);
  };
  (try_one(tag<Acts>{}), ...);
  if (found) return result;
  std::string compiled;
  auto name_one = [&](auto t) {
    constexpr rs::dtype d = rs::activation_traits<typename decltype(t)::type>::tag;
    compiled += std::string(compiled.empty() ? "" : ", ") + (d == rs::dtype::f32   ? "float32"
                                                             : d == rs::dtype::f16 ? "float16"
                                                                                   : "bfloat16");
  };
  (name_one(tag<Acts>{}), ...);
  return rs::status::error(std::string(who) + ": " + first.name + ": " + element_name(first.type) +
                           " activations are not compiled for this device (compiled: " + compiled + ")");
}

/// The request and state fields every recurrence shares, checked against the policy's
/// buffer sizes `need` (for `num_slots` slots) and bound to `p`.
template <class Policy, class Sizes>
void bind_common(checker& c, const common_args& a, const Sizes& need, int64_t num_slots, rs::step_params& p) {
  using ckpt = typename Policy::checkpoint_format;
  using read = typename Policy::read_format;
  const std::string needs = rs::describe<Policy>() + " with num_slots=" + std::to_string(num_slots);
  c.vector(a.slot_indices, element::i32, p.batch, "batch", true);
  c.vector(a.token_counts, element::i32, p.batch, "batch", true);
  c.buffer(a.checkpoint, pool_element<ckpt>(), need.checkpoint, needs);
  c.buffer(a.checkpoint_scales, element::u8, need.checkpoint_scales, needs, need.checkpoint_scales == 0);
  if constexpr (!Policy::shared_state) {
    c.buffer(a.read_copy, pool_element<read>(), need.read_copy, needs);
    c.buffer(a.read_copy_scales, element::u8, need.read_copy_scales, needs, need.read_copy_scales == 0);
  }
  c.buffer(a.cursors, element::i32, need.cursors, needs, Policy::is_writeback && !Policy::rounding::is_stochastic);
  c.vector(a.flush_phase, element::i32, num_slots, "num_slots", true);
  c.vector(a.report, element::i32, 2, "errors, request", true);
  c.vector(a.request_plans, element::i32, p.batch, "batch", true);
  p.slot_indices = static_cast<const int32_t*>(a.slot_indices.data);
  p.token_counts = static_cast<const int32_t*>(a.token_counts.data);
  p.pad_slot_id = a.pad_slot_id;
  p.num_slots = int32_t(num_slots);
  p.checkpoint = a.checkpoint.data;
  p.checkpoint_scales = a.checkpoint_scales.data;
  p.read_copy = Policy::shared_state ? nullptr : a.read_copy.data;
  p.read_copy_scales = Policy::shared_state ? nullptr : a.read_copy_scales.data;
  p.cursors = static_cast<rs::replay_cursor*>(a.cursors.data);
  p.flush_phase = static_cast<const int32_t*>(a.flush_phase.data);
  p.seed = a.seed;
  p.report = static_cast<rs::step_report*>(a.report.data);
  p.request_plans = static_cast<rs::request_plan*>(a.request_plans.data);
}

/// Slots of the state pools: the checkpoint's first dimension.
inline int64_t slot_count(checker& c, const array& checkpoint) {
  if (checkpoint.given() && checkpoint.ndim < 1) c.fail(checkpoint, "expected [num_slots, ...], got a scalar");
  if (!checkpoint.given()) c.fail(checkpoint, "is required");
  return checkpoint.given() && checkpoint.ndim >= 1 ? checkpoint.shape[0] : 0;
}

/// Ring entries per slot of a replay window, the second dimension of its `[num_slots,
/// window_entries, heads]` scalar buffer (`window_dt`, `window_g`).
template <class Policy>
int32_t ring_entries(checker& c, const array& window, int64_t num_slots, int64_t heads) {
  if constexpr (Policy::is_writeback) {
    return 0;
  } else {
    const int64_t extents[] = {num_slots, -1, heads};
    c.strided(window, element::f32, 3, extents, "num_slots, window_entries, heads");
    if (!c.status().ok()) return 0;
    if (window.shape[1] < Policy::window)
      c.fail(window, "holds " + std::to_string(window.shape[1]) + " ring entries per slot; " + rs::describe<Policy>() +
                         " needs at least " + std::to_string(Policy::window));
    return int32_t(window.shape[1]);
  }
}

/// Ring entries beyond the policy's window (room for drafts) of a replay step's buffers.
template <class Policy>
int32_t draft_entries(const rs::step_params& p) {
  return p.window_entries > 0 ? p.window_entries - Policy::window : 0;
}

/// Runs the step `call.kind` on the backend.
template <class Backend, class Policy, class Params>
rs::status launch(const char* who, const step_call& call, const Params& p) {
  if (call.kind == rs::step_kind::decode) return Backend::template decode<Policy>(p, call.stream);
  if constexpr (Policy::is_writeback) {
    return rs::status::error(std::string(who) + ": the verify step needs a replay policy, not " +
                             rs::describe<Policy>());
  } else {
    return Backend::template verify<Policy>(p, call.stream);
  }
}

/// The rows of a step's activations: `tokens` per request.
inline int64_t request_count(checker& c, const array& first, int32_t tokens) {
  if (tokens < 1) {
    c.fail(first, "tokens=" + std::to_string(tokens) + " must be at least 1");
    return 0;
  }
  if (first.shape[0] % tokens != 0)
    c.fail(first, std::to_string(first.shape[0]) +
                      " rows are not a whole number of requests of tokens=" + std::to_string(tokens));
  return first.shape[0] / tokens;
}

}  // namespace detail

/// A Mamba-2 decode or verify step on `Backend`, on the device of `x`.
template <class Backend>
rs::status mamba2_step(const step_call& call, const mamba2_args& a) {
  const char* who = "mamba2";
  checker c(who, a.x.device, a.x.device_id);
  const int64_t any3[] = {-1, -1, -1};
  const bool shaped = a.heads > 0;  // else the shape is taken from x and B
  c.activation(a.x).strided(a.x, a.x.type, 3, any3, "batch * tokens, heads, head_dim");
  if (!shaped) c.strided(a.B, a.x.type, 3, any3, "batch * tokens, groups, state_dim");
  if (!c.status().ok()) return c.status();
  const int64_t rows = a.x.shape[0], H = shaped ? a.heads : a.x.shape[1], P = shaped ? a.head_dim : a.x.shape[2],
                G = shaped ? a.groups : a.B.shape[1], N = shaped ? a.state_dim : a.B.shape[2];
  const int64_t batch = detail::request_count(c, a.x, a.tokens);
  const int64_t x_rows[] = {rows, H, P}, bc_rows[] = {rows, G, N}, dt_rows[] = {rows, H};
  c.strided(a.x, a.x.type, 3, x_rows, "batch * tokens, heads, head_dim");
  c.strided(a.B, a.x.type, 3, bc_rows, "batch * tokens, groups, state_dim");
  c.strided(a.y, a.x.type, 3, x_rows, "batch * tokens, heads, head_dim");
  c.strided(a.z, a.x.type, 3, x_rows, "batch * tokens, heads, head_dim", true);
  c.strided(a.C, a.x.type, 3, bc_rows, "batch * tokens, groups, state_dim");
  c.strided(a.dt, a.x.type, 2, dt_rows, "batch * tokens, heads");
  c.vector(a.A, element::f32, H, "heads");
  c.vector(a.D, element::f32, H, "heads", true);
  c.vector(a.dt_bias, element::f32, H, "heads", true);
  const int64_t num_slots = detail::slot_count(c, a.checkpoint);
  if (!c.status().ok()) return c.status();

  return detail::visit_activation(typename Backend::activations{}, who, a.x, [&](auto act_tag) {
    using Act = typename decltype(act_tag)::type;
    return visit(typename Backend::policy_list{}, call.policy, [&](auto policy_tag) {
      using Policy = typename decltype(policy_tag)::type;
      const rs::mamba2_layer_shape shape{int32_t(H), int32_t(P), int32_t(N), int32_t(G)};
      rs::mamba2_params<Act> p = rs::contiguous_mamba2_params<Act>(shape, int32_t(batch), a.tokens);
      p.window_entries = detail::ring_entries<Policy>(c, a.window_dt, num_slots, H);
      const auto need = rs::mamba2_buffers<Policy>(shape, num_slots, rs::activation_traits<Act>::tag,
                                                   detail::draft_entries<Policy>(p));
      detail::bind_common<Policy>(c, a, need, num_slots, p);
      if constexpr (!Policy::is_writeback) {
        const std::string needs = rs::describe<Policy>() + " with num_slots=" + std::to_string(num_slots) +
                                  ", window_entries=" + std::to_string(p.window_entries);
        c.buffer(a.window_x, a.x.type, need.window_x, needs);
        c.buffer(a.window_B, a.x.type, need.window_B, needs);
        c.buffer(a.window_dt, element::f32, need.window_dt, needs);
      }
      if (!c.status().ok()) return c.status();
      p.x = static_cast<const Act*>(a.x.data);
      p.x_batch_stride = a.x.strides[0], p.x_head_stride = a.x.strides[1];
      p.z = static_cast<const Act*>(a.z.data);
      p.z_batch_stride = a.z.strides[0], p.z_head_stride = a.z.strides[1];
      p.y = static_cast<Act*>(a.y.data);
      p.y_batch_stride = a.y.strides[0], p.y_head_stride = a.y.strides[1];
      p.dt = static_cast<const Act*>(a.dt.data);
      p.dt_batch_stride = a.dt.strides[0], p.dt_head_stride = a.dt.strides[1];
      p.B = static_cast<const Act*>(a.B.data);
      p.B_batch_stride = a.B.strides[0], p.B_group_stride = a.B.strides[1];
      p.C = static_cast<const Act*>(a.C.data);
      p.C_batch_stride = a.C.strides[0], p.C_group_stride = a.C.strides[1];
      p.A = static_cast<const float*>(a.A.data);
      p.D = static_cast<const float*>(a.D.data);
      p.dt_bias = static_cast<const float*>(a.dt_bias.data);
      p.dt_softplus = a.dt_softplus;
      p.window_x = static_cast<Act*>(a.window_x.data);
      p.window_B = static_cast<Act*>(a.window_B.data);
      p.window_dt = static_cast<float*>(a.window_dt.data);
      return detail::launch<Backend, Policy>(who, call, p);
    });
  });
}

namespace detail {

/// Views of a packed `qkv` ([rows, 2 * key_heads * key_dim + value_heads * value_dim], its
/// last dimension contiguous) as q, k and v, with the layer's shape (value_heads and
/// value_dim from `out` when not given).
inline rs::status unpack_qkv(gdn_args& a) {
  checker c("gated_deltanet", a.qkv.device, a.qkv.device_id);
  c.unused(a.q, "q, k and v come packed in qkv here").unused(a.k, "q, k and v come packed in qkv here");
  c.unused(a.v, "q, k and v come packed in qkv here");
  const int64_t any2[] = {-1, -1}, any3[] = {-1, -1, -1};
  c.activation(a.qkv).strided(a.qkv, a.qkv.type, 2, any2,
                              "batch * tokens, 2 * key_heads * key_dim + value_heads * value_dim");
  if (a.value_heads <= 0) c.strided(a.o, a.qkv.type, 3, any3, "batch * tokens, value_heads, value_dim");
  if (!c.status().ok()) return c.status();
  const int64_t HV = a.value_heads > 0 ? a.value_heads : a.o.shape[1];
  const int64_t V = a.value_heads > 0 ? a.value_dim : a.o.shape[2];
  const int64_t values = HV * V, keys = (a.qkv.shape[1] - values) / 2;
  if (a.key_heads < 1 || keys < 1 || 2 * keys + values != a.qkv.shape[1] || keys % a.key_heads != 0)
    return c
        .fail(a.qkv, std::to_string(a.qkv.shape[1]) + " columns are not 2 * key_heads * key_dim + " +
                         std::to_string(values) +
                         " (value_heads * value_dim) with key_heads=" + std::to_string(a.key_heads))
        .status();
  const int64_t K = keys / a.key_heads;
  auto part = [&](const char* name, int64_t column, int64_t heads, int64_t dim) {
    array view = a.qkv;
    view.name = name;
    view.data = static_cast<uint8_t*>(a.qkv.data) + column * element_size(a.qkv.type);
    view.ndim = 3;
    view.shape[1] = heads, view.shape[2] = dim;
    view.strides[1] = dim, view.strides[2] = 1;
    return view;
  };
  a.q = part("q", 0, a.key_heads, K);
  a.k = part("k", keys, a.key_heads, K);
  a.v = part("v", 2 * keys, HV, V);
  a.qkv = array{};
  return {};
}

}  // namespace detail

/// A Gated DeltaNet decode or verify step on `Backend`, on the device of `q` (or `qkv`).
template <class Backend>
rs::status gdn_step(const step_call& call, const gdn_args& given) {
  const char* who = "gated_deltanet";
  gdn_args a = given;
  if (a.qkv.given()) {
    if (rs::status s = detail::unpack_qkv(a); !s) return s;
  }
  checker c(who, a.q.device, a.q.device_id);
  const int64_t any3[] = {-1, -1, -1};
  const bool shaped = a.value_heads > 0;  // else the shape is taken from q and v
  c.activation(a.q).strided(a.q, a.q.type, 3, any3, "batch * tokens, key_heads, key_dim");
  if (!shaped) c.strided(a.v, a.q.type, 3, any3, "batch * tokens, value_heads, value_dim");
  if (!c.status().ok()) return c.status();
  const int64_t rows = a.q.shape[0], HK = shaped ? a.key_heads : a.q.shape[1], K = shaped ? a.key_dim : a.q.shape[2],
                HV = shaped ? a.value_heads : a.v.shape[1], V = shaped ? a.value_dim : a.v.shape[2];
  const int64_t batch = detail::request_count(c, a.q, a.tokens);
  const int64_t key_rows[] = {rows, HK, K}, value_rows[] = {rows, HV, V}, gate_rows[] = {rows, HV};
  c.strided(a.q, a.q.type, 3, key_rows, "batch * tokens, key_heads, key_dim");
  c.strided(a.k, a.q.type, 3, key_rows, "batch * tokens, key_heads, key_dim");
  c.strided(a.v, a.q.type, 3, value_rows, "batch * tokens, value_heads, value_dim");
  c.strided(a.o, a.q.type, 3, value_rows, "batch * tokens, value_heads, value_dim");
  c.strided(a.a, a.q.type, 2, gate_rows, "batch * tokens, value_heads");
  c.strided(a.b, a.q.type, 2, gate_rows, "batch * tokens, value_heads");
  c.vector(a.A_log, element::f32, HV, "value_heads");
  c.vector(a.dt_bias, element::f32, HV, "value_heads", true);
  const int64_t num_slots = detail::slot_count(c, a.checkpoint);
  if (!c.status().ok()) return c.status();

  return detail::visit_activation(typename Backend::activations{}, who, a.q, [&](auto act_tag) {
    using Act = typename decltype(act_tag)::type;
    return visit_gdn_policy<typename Backend::policy_list>(call.policy, a.raw_inputs, [&](auto policy_tag) {
      using Policy = typename decltype(policy_tag)::type;
      const rs::gdn_layer_shape shape{int32_t(HV), int32_t(HK), int32_t(K), int32_t(V)};
      rs::gdn_params<Act> p = rs::contiguous_gdn_params<Act>(shape, int32_t(batch), a.tokens);
      p.window_entries = detail::ring_entries<Policy>(c, a.window_g, num_slots, HV);
      const auto need =
          rs::gdn_buffers<Policy>(shape, num_slots, rs::activation_traits<Act>::tag, detail::draft_entries<Policy>(p));
      detail::bind_common<Policy>(c, a, need, num_slots, p);
      if constexpr (!Policy::is_writeback) {
        const std::string needs = rs::describe<Policy>() + " with num_slots=" + std::to_string(num_slots) +
                                  ", window_entries=" + std::to_string(p.window_entries);
        c.buffer(a.window_u, element::f32, need.window_u, needs);
        c.buffer(a.window_k, element::f32, need.window_k, needs);
        c.buffer(a.window_g, element::f32, need.window_g, needs);
        if constexpr (rs::keeps_raw_inputs<Policy>) {
          c.buffer(a.window_v, a.q.type, need.window_v, needs);
          c.buffer(a.window_beta, element::f32, need.window_beta, needs);
        }
      }
      if (!c.status().ok()) return c.status();
      p.q = static_cast<const Act*>(a.q.data);
      p.q_batch_stride = a.q.strides[0], p.q_head_stride = a.q.strides[1];
      p.k = static_cast<const Act*>(a.k.data);
      p.k_batch_stride = a.k.strides[0], p.k_head_stride = a.k.strides[1];
      p.v = static_cast<const Act*>(a.v.data);
      p.v_batch_stride = a.v.strides[0], p.v_head_stride = a.v.strides[1];
      p.o = static_cast<Act*>(a.o.data);
      p.o_batch_stride = a.o.strides[0], p.o_head_stride = a.o.strides[1];
      p.a = static_cast<const Act*>(a.a.data);
      p.a_batch_stride = a.a.strides[0], p.a_head_stride = a.a.strides[1];
      p.b = static_cast<const Act*>(a.b.data);
      p.b_batch_stride = a.b.strides[0], p.b_head_stride = a.b.strides[1];
      p.A_log = static_cast<const float*>(a.A_log.data);
      p.dt_bias = static_cast<const float*>(a.dt_bias.data);
      p.window_u = static_cast<float*>(a.window_u.data);
      p.window_k = static_cast<float*>(a.window_k.data);
      p.window_g = static_cast<float*>(a.window_g.data);
      if constexpr (rs::keeps_raw_inputs<Policy>) {
        p.window_v = static_cast<Act*>(a.window_v.data);
        p.window_beta = static_cast<float*>(a.window_beta.data);
      }
      return detail::launch<Backend, Policy>(who, call, p);
    });
  });
}

/// The params of a commit (any recurrence's: only the shared fields), on the device of
/// `cursors`; the error when an argument is wrong.
inline rs::status commit_params(const commit_args& a, rs::step_params& p) {
  checker c("commit", a.cursors.device, a.cursors.device_id);
  const int64_t cursor_layout[] = {-1, -1, 4};
  c.strided(a.cursors, element::i32, 3, cursor_layout, "num_slots, heads, 4");
  c.buffer(a.cursors, element::i32, 0, "");
  if (!c.status().ok()) return c.status();
  p.num_slots = int32_t(a.cursors.shape[0]);
  p.heads = int32_t(a.cursors.shape[1]);
  c.vector(a.accepted_counts, element::i32, 0, "batch");
  if (!c.status().ok()) return c.status();
  p.batch = int32_t(a.accepted_counts.shape[0]);
  p.tokens = a.tokens;
  c.vector(a.slot_indices, element::i32, p.batch, "batch", true);
  c.vector(a.token_counts, element::i32, p.batch, "batch", true);
  c.vector(a.report, element::i32, 2, "errors, request", true);
  p.cursors = static_cast<rs::replay_cursor*>(a.cursors.data);
  p.accepted_counts = static_cast<const int32_t*>(a.accepted_counts.data);
  p.slot_indices = static_cast<const int32_t*>(a.slot_indices.data);
  p.token_counts = static_cast<const int32_t*>(a.token_counts.data);
  p.pad_slot_id = a.pad_slot_id;
  p.report = static_cast<rs::step_report*>(a.report.data);
  return c.status();
}

}  // namespace replayssm_python
