// SPDX-License-Identifier: Apache-2.0
// Example: a stack of Mamba-2 layers with fixed-seed random weights generates tokens for a
// batch, once with the conventional write-back step and once with replay, in lockstep on
// the same tokens. It prints the active mode, tokens/s, modelled bytes per step and memory
// per request, and ends with the agreement of the two:
//
//   replay_vs_naive_max_rel_err=<value> steps=<n> mode=<describe()>
//
// Runs on the CPU by default; `--device cuda` runs the same steps on the GPU.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "../common/example_backend.hpp"

using namespace replayssm_example;

namespace {

using replay_mode = replay_policy<16, fp32_format>;
using naive_mode = writeback_policy<fp32_format>;

struct options {
  std::string model = "small";
  std::string device = "cpu";
  std::string dump;
  int batch = 4;
  int steps = 64;
  bool stagger = false;
  uint64_t seed = 2026;
  int layers = 4;
  mamba2_layer_shape shape{8, 64, 128, 2};
  int vocab = 256;
};

void usage() {
  std::printf(
      "usage: decode_loop [--device cpu|cuda] [--model small|nemotron-nano-like|nemotron-super-like]\n"
      "                   [--batch B] [--steps T] [--layers L] [--stagger] [--seed S] [--dump DIR]\n");
}

bool parse(int argc, char** argv, options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--device") o.device = value();
    else if (a == "--model") o.model = value();
    else if (a == "--dump") o.dump = value();
    else if (a == "--batch") o.batch = std::atoi(value().c_str());
    else if (a == "--steps") o.steps = std::atoi(value().c_str());
    else if (a == "--layers") o.layers = std::atoi(value().c_str());
    else if (a == "--seed") o.seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--stagger") o.stagger = true;
    else return false;
  }
  if (o.model == "nemotron-nano-like") o.shape = {96, 80, 128, 8};
  else if (o.model == "nemotron-super-like") o.shape = {128, 64, 128, 8};
  else if (o.model != "small") return false;
  return (o.device == "cpu" || o.device == "cuda") && o.batch > 0 && o.steps > 0 && o.layers > 0;
}

/// Raw pointers of the model and one stack's activations, valid on the executing side.
/// Its members are the per-request pieces of a decode step around the Mamba-2 layers.
struct stack_view {
  int d_model, vocab, heads, groups, state_dim;
  const float* embed;    // [vocab][d_model]
  const float* z_table;  // [layers][vocab][d_model]
  const float* bc_table; // [layers][vocab][2][groups * state_dim]
  const float* dt_table; // [layers][vocab][heads]
  const int32_t* token;  // [batch]
  float* hidden;         // [batch][d_model] residual stream
  float* x;              // [batch][d_model] layer input
  float* z;              // [batch][d_model]
  float* B;              // [batch][groups * state_dim]
  float* C;
  float* dt;             // [batch][heads]
  float* y;              // [batch][d_model] layer output

  REPLAYSSM_HOST_DEVICE void embed_token(int b) const {
    const float* e = embed + size_t(token[b]) * d_model;
    for (int i = 0; i < d_model; ++i) hidden[size_t(b) * d_model + i] = e[i];
  }
  /// Layer inputs: x is the normalized residual stream, the rest are per-token tables.
  REPLAYSSM_HOST_DEVICE void layer_inputs(int layer, int b) const {
    const size_t row = size_t(layer) * vocab + size_t(token[b]);
    const int gn = groups * state_dim;
    for (int i = 0; i < d_model; ++i) {
      x[size_t(b) * d_model + i] = hidden[size_t(b) * d_model + i];
      z[size_t(b) * d_model + i] = z_table[row * d_model + i];
    }
    for (int i = 0; i < gn; ++i) {
      B[size_t(b) * gn + i] = bc_table[(row * 2) * gn + i];
      C[size_t(b) * gn + i] = bc_table[(row * 2 + 1) * gn + i];
    }
    for (int h = 0; h < heads; ++h) dt[size_t(b) * heads + h] = dt_table[row * heads + h];
  }
  /// hidden = rmsnorm(hidden + y).
  REPLAYSSM_HOST_DEVICE void residual(int b) const {
    add_and_rmsnorm(hidden + size_t(b) * d_model, y + size_t(b) * d_model, d_model);
  }
  /// Greedy toy sampler: the position of the largest activation, folded into the vocabulary.
  REPLAYSSM_HOST_DEVICE int32_t next_token(int b) const {
    const float* h = hidden + size_t(b) * d_model;
    int best = 0;
    for (int i = 1; i < d_model; ++i)
      if (h[i] > h[best]) best = i;
    return int32_t(best % vocab);
  }
};

// The per-request pieces as function objects, callable on host and device.
struct embed_piece {
  REPLAYSSM_HOST_DEVICE void operator()(const stack_view& v, int b) const { v.embed_token(b); }
};
struct inputs_piece {
  int layer;
  REPLAYSSM_HOST_DEVICE void operator()(const stack_view& v, int b) const { v.layer_inputs(layer, b); }
};
struct residual_piece {
  REPLAYSSM_HOST_DEVICE void operator()(const stack_view& v, int b) const { v.residual(b); }
};
struct sample_piece {
  int32_t* tokens;
  REPLAYSSM_HOST_DEVICE void operator()(const stack_view& v, int b) const { tokens[b] = v.next_token(b); }
};

/// One stack of layers under one policy: its state buffers, activations and parameters.
template <class Policy>
struct stack {
  std::vector<mamba2_params> layers;
  stack_view view{};
  std::vector<float*> y_per_layer;

  stack(backend& be, const options& o, const model_weights& w, int32_t* tokens, float* A, float* D, float* bias) {
    const auto& s = o.shape;
    const size_t d = size_t(s.heads) * s.head_dim, gn = size_t(s.groups) * s.state_dim;
    const size_t batch = size_t(o.batch);
    view = stack_view{int(d), o.vocab, s.heads, s.groups, s.state_dim,
                      nullptr, nullptr, nullptr, nullptr, tokens,
                      static_cast<float*>(be.allocate(batch * d * 4)), static_cast<float*>(be.allocate(batch * d * 4)),
                      static_cast<float*>(be.allocate(batch * d * 4)), static_cast<float*>(be.allocate(batch * gn * 4)),
                      static_cast<float*>(be.allocate(batch * gn * 4)), static_cast<float*>(be.allocate(batch * s.heads * 4)),
                      nullptr};
    std::vector<int32_t> phase(batch);
    for (size_t b = 0; b < batch; ++b) phase[b] = o.stagger ? int32_t(b * Policy::window / batch) : 0;
    const int32_t* phase_dev = be.upload(phase);
    for (int l = 0; l < o.layers; ++l) {
      const auto sizes = mamba2_buffers<Policy>(s, o.batch, dtype::f32);
      mamba2_params p = contiguous_mamba2_params(s, o.batch, dtype::f32);
      p.x = view.x;
      p.z = view.z;
      p.dt = view.dt;
      p.B = view.B;
      p.C = view.C;
      p.A = A + l * s.heads;
      p.D = D + l * s.heads;
      p.dt_bias = bias + l * s.heads;
      p.num_slots = o.batch;
      p.checkpoint = be.allocate(sizes.checkpoint);
      p.read_copy = Policy::shared_state ? nullptr : be.allocate(sizes.read_copy);
      p.window_x = be.allocate(sizes.window_x);
      p.window_B = be.allocate(sizes.window_B);
      p.window_dt = static_cast<float*>(be.allocate(sizes.window_dt));
      p.cursors = static_cast<replay_cursor*>(be.allocate(sizes.cursors));
      p.flush_phase = phase_dev;
      p.y = be.allocate(batch * d * 4);
      y_per_layer.push_back(static_cast<float*>(p.y));
      // fp32 state: the prefill state is copied in as is (other formats would encode it
      // with write_head_state).
      be.copy(p.checkpoint, w.initial_state[size_t(l)].data(), sizes.checkpoint);
      layers.push_back(p);
    }
  }

  /// One token for the whole batch: embed, every layer with its residual.
  void step(const backend& be, int batch) {
    be.for_each_row(view, batch, embed_piece{});
    for (size_t l = 0; l < layers.size(); ++l) {
      view.y = y_per_layer[l];
      be.for_each_row(view, batch, inputs_piece{int(l)});
      be.template decode_step<Policy>(layers[l]);
      be.for_each_row(view, batch, residual_piece{});
    }
  }
};

/// Writes a float32 or int32 array as a .npy file (format version 1.0, C order).
template <class T>
void write_npy(const std::string& path, const std::vector<T>& data, const std::vector<size_t>& shape) {
  std::string dims;
  for (size_t d : shape) dims += std::to_string(d) + ",";
  std::string header = std::string("{'descr': '") + (std::is_same_v<T, float> ? "<f4" : "<i4") +
                       "', 'fortran_order': False, 'shape': (" + dims + "), }";
  header.append(63 - (10 + header.size()) % 64, ' ');
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  const uint16_t len = uint16_t(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.write(reinterpret_cast<const char*>(&len), 2);
  f << header;
  f.write(reinterpret_cast<const char*>(data.data()), std::streamsize(data.size() * sizeof(T)));
  if (!f) throw std::runtime_error("cannot write " + path);
}

double relative_error(const std::vector<float>& a, const std::vector<float>& b, size_t offset, size_t n) {
  double num = 0, den = 0;
  for (size_t i = offset; i < offset + n; ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

int run(const options& o) {
  backend be(o.device == "cuda");
  const auto& s = o.shape;
  const size_t d = size_t(s.heads) * s.head_dim, gn = size_t(s.groups) * s.state_dim, batch = size_t(o.batch);
  std::printf("model: %d Mamba-2 layers, %d heads x %d x %d, %d groups, batch %d, %d steps, device %s\n", o.layers,
              s.heads, s.head_dim, s.state_dim, s.groups, o.batch, o.steps, o.device.c_str());
  std::printf("mode: %s (baseline: %s)\n", describe<replay_mode>().c_str(), describe<naive_mode>().c_str());

  const model_weights w(o.seed, o.shape, o.layers, o.vocab, o.batch);
  std::vector<int32_t> first_tokens(batch);
  for (size_t b = 0; b < batch; ++b) first_tokens[b] = int32_t((b * 37 + 11) % size_t(o.vocab));
  int32_t* tokens = be.upload(first_tokens);
  float* A = be.upload(w.A);
  float* D = be.upload(w.D);
  float* bias = be.upload(w.dt_bias);
  stack<naive_mode> naive(be, o, w, tokens, A, D, bias);
  stack<replay_mode> replay(be, o, w, tokens, A, D, bias);
  for (auto* v : {&naive.view, &replay.view}) {
    v->embed = be.upload(w.embed);
    v->z_table = be.upload(w.z_table);
    v->bc_table = be.upload(w.bc_table);
    v->dt_table = be.upload(w.dt_table);
  }

  const bool dump = !o.dump.empty();
  std::vector<float> outputs_naive, outputs_replay;
  std::vector<int32_t> token_log;
  double max_err = 0, naive_seconds = 0, replay_seconds = 0;
  using clock = std::chrono::steady_clock;
  for (int t = 0; t < o.steps; ++t) {
    if (dump) {
      const auto tk = be.download(tokens, batch);
      token_log.insert(token_log.end(), tk.begin(), tk.end());
    }
    auto t0 = clock::now();
    naive.step(be, o.batch);
    be.finish();
    auto t1 = clock::now();
    replay.step(be, o.batch);
    be.finish();
    auto t2 = clock::now();
    naive_seconds += std::chrono::duration<double>(t1 - t0).count();
    replay_seconds += std::chrono::duration<double>(t2 - t1).count();
    // Both stacks consume the tokens the replay stack samples.
    be.for_each_row(replay.view, o.batch, sample_piece{tokens});
    for (int l = 0; l < o.layers; ++l) {
      const auto yn = be.download(naive.y_per_layer[size_t(l)], batch * d);
      const auto yr = be.download(replay.y_per_layer[size_t(l)], batch * d);
      for (size_t b = 0; b < batch; ++b) max_err = std::max(max_err, relative_error(yr, yn, b * d, d));
      if (dump) {
        outputs_naive.insert(outputs_naive.end(), yn.begin(), yn.end());
        outputs_replay.insert(outputs_replay.end(), yr.begin(), yr.end());
      }
    }
  }

  const double tokens_total = double(o.steps) * o.batch;
  std::printf("tokens/s: naive %.1f, replay %.1f (whole stack, %s)\n", tokens_total / naive_seconds,
              tokens_total / replay_seconds, o.device.c_str());
  const double bn = mamba2_bytes_per_step<naive_mode>(s, o.batch, dtype::f32) * o.layers;
  const double br = mamba2_bytes_per_step<replay_mode>(s, o.batch, dtype::f32) * o.layers;
  std::printf("modelled bytes per step (all layers): naive %.3f MB, replay %.3f MB (%.2fx fewer)\n", bn / 1e6, br / 1e6,
              bn / br);
  const auto mem = mamba2_buffers<replay_mode>(s, 1, dtype::f32);
  std::printf("memory per request per layer: checkpoint %zu B, read copy %zu B, window %zu B\n", mem.checkpoint_total(),
              mem.read_copy_total(), mem.window_total());

  if (dump) {
    std::filesystem::create_directories(o.dump);
    const std::string dir = o.dump + "/";
    const size_t L = size_t(o.layers), T = size_t(o.steps);
    write_npy(dir + "tokens.npy", token_log, {T, batch});
    write_npy(dir + "A.npy", w.A, {L, size_t(s.heads)});
    write_npy(dir + "D.npy", w.D, {L, size_t(s.heads)});
    write_npy(dir + "dt_bias.npy", w.dt_bias, {L, size_t(s.heads)});
    write_npy(dir + "embed.npy", w.embed, {size_t(o.vocab), d});
    write_npy(dir + "z_table.npy", w.z_table, {L, size_t(o.vocab), d});
    write_npy(dir + "bc_table.npy", w.bc_table, {L, size_t(o.vocab), 2, gn});
    write_npy(dir + "dt_table.npy", w.dt_table, {L, size_t(o.vocab), size_t(s.heads)});
    std::vector<float> init, final_naive, final_replay;
    for (int l = 0; l < o.layers; ++l) {
      const size_t n = batch * size_t(s.state_elements());
      init.insert(init.end(), w.initial_state[size_t(l)].begin(), w.initial_state[size_t(l)].end());
      const auto fn = be.download(static_cast<const float*>(naive.layers[size_t(l)].checkpoint), n);
      const auto fr = be.download(static_cast<const float*>(replay.layers[size_t(l)].checkpoint), n);
      final_naive.insert(final_naive.end(), fn.begin(), fn.end());
      final_replay.insert(final_replay.end(), fr.begin(), fr.end());
    }
    const std::vector<size_t> state_shape{L, batch, size_t(s.heads), size_t(s.head_dim), size_t(s.state_dim)};
    write_npy(dir + "initial_state.npy", init, state_shape);
    write_npy(dir + "final_state_naive.npy", final_naive, state_shape);
    write_npy(dir + "final_checkpoint_replay.npy", final_replay, state_shape);
    const std::vector<size_t> out_shape{T, L, batch, size_t(s.heads), size_t(s.head_dim)};
    write_npy(dir + "outputs_naive.npy", outputs_naive, out_shape);
    write_npy(dir + "outputs_replay.npy", outputs_replay, out_shape);
    std::printf("dumped inputs, outputs and states to %s\n", o.dump.c_str());
  }
  std::printf("replay_vs_naive_max_rel_err=%.3e steps=%d mode=%s\n", max_err, o.steps,
              describe<replay_mode>().c_str());
  // With an fp32 state replay agrees with write-back to float rounding; more is a defect.
  return max_err <= 1e-5 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) { return example_main<options>(argc, argv, parse, usage, run); }
