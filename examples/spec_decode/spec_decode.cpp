// SPDX-License-Identifier: Apache-2.0
// Example: speculative decoding over a stack of Mamba-2 layers with fixed-seed random
// weights. Each round every request proposes T draft tokens, the replay stack verifies them
// in one step per layer (every draft's output from checkpoint + window + the drafts before
// it), a toy acceptance model keeps a prefix of each request's drafts, and the commit only
// moves the window cursors: no per-draft state snapshots. A second stack decodes the
// accepted tokens one at a time with the conventional write-back step, and the outputs of
// the accepted drafts are compared with it. The last line is
//
//   spec_vs_sequential_max_rel_err=<value> rounds=<n> mean_accepted=<x> snapshot_bytes_avoided=<b>
//
// Runs on the CPU by default; `--device cuda` runs the same steps on the GPU.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../common/example_backend.hpp"

using namespace replayssm_example;

namespace {

using spec_mode = replay_policy<16, fp32_format>;
using sequential_mode = writeback_policy<fp32_format>;

/// Largest relative error between a speculative output and its sequential counterpart that
/// is accepted: both keep fp32 states, so they differ by float rounding (about 1e-6).
constexpr double tolerance = 1e-4;

struct options {
  std::string model = "small";
  std::string device = "cpu";
  int batch = 4;
  int rounds = 32;
  int drafts = 4;
  double accept = 0.7;
  int layers = 4;
  uint64_t seed = 2026;
  mamba2_layer_shape shape{8, 64, 128, 2};
  int vocab = 256;
};

/// A verify step takes at most max_draft_tokens drafts, and they must fit the window.
constexpr int most_drafts = std::min(max_draft_tokens, spec_mode::window);

const std::string usage_text =
    "usage: spec_decode [--device cpu|cuda] [--model small|nemotron-nano-like] [--batch B] [--rounds R]\n"
    "                   [--drafts T] [--accept P] [--layers L] [--seed S]\n"
    "B in [1, 4096], R in [1, 16777216], T in [1, " + std::to_string(most_drafts) +
    "], P in [0, 1], L in [1, 256].\n";

/// Parses the options and checks that the device can run them. Returns args::proceed or
/// the exit code.
int parse(int argc, char** argv, options& o) {
  args::parser cli("spec_decode", usage_text);
  cli.choice("--device", o.device, {"cpu", "cuda"});
  cli.choice("--model", o.model, {"small", "nemotron-nano-like"});
  cli.integer("--batch", o.batch, 1, 4096);
  cli.integer("--rounds", o.rounds, 1, 1 << 24);
  cli.integer("--drafts", o.drafts, 1, most_drafts);
  cli.real("--accept", o.accept, 0.0, 1.0);
  cli.integer("--layers", o.layers, 1, 256);
  cli.integer<uint64_t>("--seed", o.seed, 0, UINT64_MAX);
  if (const int code = cli.parse(argc, argv); code != args::proceed) return code;
  if (o.model == "nemotron-nano-like") o.shape = {96, 80, 128, 8};
  return cli.check_device(o.device);
}

/// Raw pointers of the model tables and of one stack's token rows, valid where the
/// per-row pieces run (host memory, or device memory with --device cuda).
struct rows_view {
  int d_model = 0, vocab = 0, heads = 0, gn = 0;  // gn: groups * state_dim
  const float* embed = nullptr;                   // [vocab][d_model]
  const float* z_table = nullptr;                 // [layers][vocab][d_model]
  const float* bc_table = nullptr;                // [layers][vocab][2][gn]: B, then C
  const float* dt_table = nullptr;                // [layers][vocab][heads]
  int32_t* token = nullptr;                       // [rows]
  // [rows][...]. The residual stream `hidden` is also every layer's input x: the step copies
  // x into its window, and the residual update runs after the step.
  float *hidden = nullptr, *z = nullptr, *B = nullptr, *C = nullptr, *dt = nullptr;

  REPLAYSSM_HOST_DEVICE void embed_token(int r) const {
    for (int i = 0; i < d_model; ++i) hidden[size_t(r) * d_model + i] = embed[size_t(token[r]) * d_model + i];
  }
  /// z, B, C and dt of row r at `layer`: the table rows of its token.
  REPLAYSSM_HOST_DEVICE void layer_inputs(int layer, int r) const {
    const size_t key = size_t(layer) * vocab + size_t(token[r]);
    for (int i = 0; i < d_model; ++i) z[size_t(r) * d_model + i] = z_table[key * d_model + i];
    for (int i = 0; i < gn; ++i) {
      B[size_t(r) * gn + i] = bc_table[key * 2 * gn + i];
      C[size_t(r) * gn + i] = bc_table[(key * 2 + 1) * gn + i];
    }
    for (int h = 0; h < heads; ++h) dt[size_t(r) * heads + h] = dt_table[key * heads + h];
  }
  /// hidden = rmsnorm(hidden + y) for row r.
  REPLAYSSM_HOST_DEVICE void residual(const float* y, int r) const {
    add_and_rmsnorm(hidden + size_t(r) * d_model, y + size_t(r) * d_model, d_model);
  }
};

// The per-row pieces as function objects, callable on host and device.
struct embed_piece {
  REPLAYSSM_HOST_DEVICE void operator()(const rows_view& v, int r) const { v.embed_token(r); }
};
struct inputs_piece {
  int layer;
  REPLAYSSM_HOST_DEVICE void operator()(const rows_view& v, int r) const { v.layer_inputs(layer, r); }
};
struct residual_piece {
  const float* y;
  REPLAYSSM_HOST_DEVICE void operator()(const rows_view& v, int r) const { v.residual(y, r); }
};

/// The weights where the steps run: the tables in a rows_view, and the per-head weights.
struct uploaded_weights {
  rows_view tables;
  const float *A, *D, *dt_bias;

  uploaded_weights(backend& be, const options& o, const mamba2_weights& w)
      : A(be.upload(w.A)), D(be.upload(w.D)), dt_bias(be.upload(w.dt_bias)) {
    const auto& s = o.shape;
    tables.d_model = s.heads * s.head_dim;
    tables.vocab = o.vocab;
    tables.heads = s.heads;
    tables.gn = s.groups * s.state_dim;
    tables.embed = be.upload(w.embed);
    tables.z_table = be.upload(w.z_table());
    tables.bc_table = be.upload(w.bc_table());
    tables.dt_table = be.upload(w.dt_table());
  }
};

/// One stack of layers with its own state: `tokens` rows per request (request b's token t is
/// row b * tokens + t) and every layer's params.
struct layer_stack {
  rows_view view;
  int rows = 0;
  std::vector<mamba2_params<float>> layers;

  /// Embeds the rows' tokens and runs every layer: its inputs, `step(params)`, the residual.
  template <class Step>
  void forward(const backend& be, Step step) const {
    be.for_each_row(view, rows, embed_piece{});
    for (size_t l = 0; l < layers.size(); ++l) {
      be.for_each_row(view, rows, inputs_piece{int(l)});
      step(layers[l]);
      be.for_each_row(view, rows, residual_piece{layers[l].y});
    }
  }
  const float* y(int layer) const { return layers[size_t(layer)].y; }
};

/// A stack under `Policy` with `tokens` rows per request (a verify step's drafts, or 1 for
/// decode steps), every layer starting from its prefill state.
template <class Policy>
layer_stack make_stack(backend& be, const options& o, const mamba2_weights& w, const uploaded_weights& uw, int tokens) {
  const auto& s = o.shape;
  layer_stack st;
  st.rows = o.batch * tokens;
  st.view = uw.tables;
  const size_t rows = size_t(st.rows), d = size_t(st.view.d_model), gn = size_t(st.view.gn);
  st.view.token = be.array<int32_t>(rows);
  st.view.hidden = be.array<float>(rows * d);
  st.view.z = be.array<float>(rows * d);
  st.view.B = be.array<float>(rows * gn);
  st.view.C = be.array<float>(rows * gn);
  st.view.dt = be.array<float>(rows * size_t(s.heads));
  // Replay: the window ring holds `tokens` entries beyond the window for the drafts.
  const auto sizes = mamba2_buffers<Policy>(s, o.batch, dtype::f32, tokens);
  for (int l = 0; l < o.layers; ++l) {
    // Contiguous rows, so each activation's batch stride is its token-row stride.
    mamba2_params<float> p = contiguous_mamba2_params<float>(s, o.batch, tokens);
    p.x = st.view.hidden;
    p.z = st.view.z;
    p.B = st.view.B;
    p.C = st.view.C;
    p.dt = st.view.dt;
    p.y = be.array<float>(rows * d);
    p.A = uw.A + l * s.heads;
    p.D = uw.D + l * s.heads;
    p.dt_bias = uw.dt_bias + l * s.heads;
    p.num_slots = o.batch;
    // fp32 state: the prefill state is the checkpoint as is (other formats: write_head_state).
    p.checkpoint = be.upload(w.initial_state[size_t(l)]);
    if constexpr (!Policy::is_writeback) {
      p.window_entries = Policy::window + tokens;
      p.window_x = static_cast<float*>(be.allocate(sizes.window_x));
      p.window_B = static_cast<float*>(be.allocate(sizes.window_B));
      p.window_dt = static_cast<float*>(be.allocate(sizes.window_dt));
      p.cursors = static_cast<replay_cursor*>(be.allocate(sizes.cursors));
    }
    p.report = be.report();
    p.request_plans = be.request_plans(size_t(o.batch));
    st.layers.push_back(p);
  }
  return st;
}

/// 64-bit mix of two words (a multiply-add, then splitmix64's finalizer): the toy's reproducible randomness.
uint64_t mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9e3779b97f4a7c15ull + b + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// One round's drafts and how many of each request's drafts are accepted.
struct round_plan {
  std::vector<int32_t> tokens;    ///< [batch * drafts]: request b's draft t at row b * drafts + t
  std::vector<int32_t> accepted;  ///< [batch], each in [0, drafts]
};

/// The toy draft and acceptance models. Draft ids hash (seed, round, request, position); each
/// draft passes with probability `accept` independently, and a request keeps its drafts up
/// to the first that fails (the usual i.i.d. model of speculative decoding).
round_plan draw_round(const options& o, int round) {
  round_plan plan;
  for (int b = 0; b < o.batch; ++b) {
    bool accepting = true;
    int32_t kept = 0;
    for (int t = 0; t < o.drafts; ++t) {
      const uint64_t key = mix(mix(mix(o.seed, uint64_t(round)), uint64_t(b)), uint64_t(t));
      plan.tokens.push_back(int32_t(mix(key, 1) % uint64_t(o.vocab)));
      const double u = double(mix(key, 2) >> 11) * 0x1p-53;  // uniform in [0, 1)
      accepting = accepting && u < o.accept;
      kept += accepting ? 1 : 0;
    }
    plan.accepted.push_back(kept);
  }
  return plan;
}

/// ||a - b|| / ||b|| over n values.
double relative_error(const float* a, const float* b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

int run(const options& o) {
  using clock = std::chrono::steady_clock;
  backend be(o.device == "cuda");
  const auto& s = o.shape;
  const int T = o.drafts;
  const size_t batch = size_t(o.batch), d = size_t(s.heads) * s.head_dim;
  std::printf("model: %d Mamba-2 layers, %d heads x %d x %d, %d groups, batch %d, %d rounds of %d drafts, device %s\n",
              o.layers, s.heads, s.head_dim, s.state_dim, s.groups, o.batch, o.rounds, T, o.device.c_str());
  std::printf("mode: %s, verify + commit (baseline: sequential %s)\n", describe<spec_mode>().c_str(),
              describe<sequential_mode>().c_str());

  const mamba2_weights w(o.seed, o.shape, o.layers, o.vocab, o.batch);
  const uploaded_weights uw(be, o, w);
  layer_stack spec = make_stack<spec_mode>(be, o, w, uw, T);
  layer_stack seq = make_stack<sequential_mode>(be, o, w, uw, 1);
  int32_t* accepted = be.array<int32_t>(batch);
  int32_t* seq_slots = be.array<int32_t>(batch);
  for (auto& p : spec.layers) p.accepted_counts = accepted;  // read by the commit only
  for (auto& p : seq.layers) p.slot_indices = seq_slots;

  double max_err = 0, spec_seconds = 0, seq_seconds = 0;
  long total_accepted = 0;
  for (int round = 0; round < o.rounds; ++round) {
    const round_plan plan = draw_round(o, round);
    // Speculative: verify every draft through the stack, then commit the accepted prefixes.
    const auto t0 = clock::now();
    be.upload(spec.view.token, plan.tokens);
    spec.forward(be, [&](const mamba2_params<float>& p) { be.verify_step<spec_mode>(p); });
    be.upload(accepted, plan.accepted);
    for (const auto& p : spec.layers) be.commit(p);
    be.finish();
    spec_seconds += std::chrono::duration<double>(clock::now() - t0).count();
    std::vector<std::vector<float>> spec_y;
    for (int l = 0; l < o.layers; ++l) spec_y.push_back(be.download(spec.y(l), batch * T * d));

    // Sequential: the accepted tokens one at a time; a request out of accepted tokens is
    // padding for the rest of the round (pad_slot_id: the step skips it).
    const int most = *std::max_element(plan.accepted.begin(), plan.accepted.end());
    for (int j = 0; j < most; ++j) {
      std::vector<int32_t> tokens(batch), slots(batch);
      for (size_t b = 0; b < batch; ++b) {
        const bool active = j < plan.accepted[b];
        tokens[b] = active ? plan.tokens[b * T + size_t(j)] : 0;
        slots[b] = active ? int32_t(b) : seq.layers[0].pad_slot_id;
      }
      const auto t1 = clock::now();
      be.upload(seq.view.token, tokens);
      be.upload(seq_slots, slots);
      seq.forward(be, [&](const mamba2_params<float>& p) { be.decode_step<sequential_mode>(p); });
      be.finish();
      seq_seconds += std::chrono::duration<double>(clock::now() - t1).count();
      for (int l = 0; l < o.layers; ++l) {
        const auto y = be.download(seq.y(l), batch * d);
        for (size_t b = 0; b < batch; ++b) {
          if (j >= plan.accepted[b]) continue;
          const double e = relative_error(spec_y[size_t(l)].data() + (b * T + size_t(j)) * d, y.data() + b * d, d);
          if (std::isnan(e) || e > max_err) max_err = e;  // a NaN must not hide behind max
        }
      }
    }
    for (int32_t a : plan.accepted) total_accepted += a;
  }

  const double mean_accepted = double(total_accepted) / (double(o.rounds) * o.batch);
  double expected = 0;
  for (int k = 1; k <= T; ++k) expected += std::pow(o.accept, k);
  std::printf("acceptance: %.3f of %d drafts accepted per request per round (accept rate %.2f: expected %.3f)\n",
              mean_accepted, T, o.accept, expected);
  std::printf("accepted tokens/s: speculative %.1f, sequential write-back %.1f (whole stack, %s)\n",
              double(total_accepted) / spec_seconds, double(total_accepted) / std::max(seq_seconds, 1e-12),
              o.device.c_str());
  // The conventional path keeps a state snapshot per draft; replay keeps the drafts' inputs
  // in T more window ring entries instead.
  const size_t snapshots = mamba2_snapshot_bytes<fp32_format>(s, o.batch, T) * size_t(o.layers);
  const size_t ring = (mamba2_buffers<spec_mode>(s, o.batch, dtype::f32, T).window_total() -
                       mamba2_buffers<spec_mode>(s, o.batch, dtype::f32).window_total()) *
                      size_t(o.layers);
  std::printf("draft memory (all layers): snapshots avoided %zu B, extra window ring %zu B (%d entries per slot)\n",
              snapshots, ring, T);
  const auto cursors = be.download(spec.layers[0].cursors, batch * size_t(s.heads));
  uint32_t fewest = cursors[0].flush_count;
  for (size_t b = 0; b < batch; ++b) fewest = std::min(fewest, cursors[b * size_t(s.heads)].flush_count);
  std::printf("window flushes (layer 0): at least %u per request during the run\n", fewest);
  std::printf("spec_vs_sequential_max_rel_err=%.3e rounds=%d mean_accepted=%.3f snapshot_bytes_avoided=%zu\n", max_err,
              o.rounds, mean_accepted, snapshots);
  return max_err <= tolerance ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return example_main<options>(argc, argv, parse, run); }
