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
#include <replayssm/replayssm.hpp>
#if REPLAYSSM_CUDA_COMPILER
#include <replayssm/kernels/cuda_decode.cuh>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace replayssm;

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

void usage() {
  std::printf(
      "usage: spec_decode [--device cpu|cuda] [--model small|nemotron-nano-like] [--batch B] [--rounds R]\n"
      "                   [--drafts T] [--accept P] [--layers L] [--seed S]\n");
}

bool parse(int argc, char** argv, options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--device") o.device = value();
    else if (a == "--model") o.model = value();
    else if (a == "--batch") o.batch = std::atoi(value().c_str());
    else if (a == "--rounds") o.rounds = std::atoi(value().c_str());
    else if (a == "--drafts") o.drafts = std::atoi(value().c_str());
    else if (a == "--accept") o.accept = std::atof(value().c_str());
    else if (a == "--layers") o.layers = std::atoi(value().c_str());
    else if (a == "--seed") o.seed = std::strtoull(value().c_str(), nullptr, 10);
    else return false;
  }
  if (o.model == "nemotron-nano-like") o.shape = {96, 80, 128, 8};
  else if (o.model != "small") return false;
  // A verify step takes at most max_draft_tokens drafts, and they must fit the window.
  const int most_drafts = std::min(max_draft_tokens, spec_mode::window);
  return (o.device == "cpu" || o.device == "cuda") && o.batch > 0 && o.rounds > 0 && o.layers > 0 && o.drafts >= 1 &&
         o.drafts <= most_drafts && o.accept >= 0.0 && o.accept <= 1.0;
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
    float* h = hidden + size_t(r) * d_model;
    double sum = 0;
    for (int i = 0; i < d_model; ++i) {
      h[i] += y[size_t(r) * d_model + i];
      sum += double(h[i]) * h[i];
    }
    const float inv = float(1.0 / std::sqrt(sum / d_model + 1e-6));
    for (int i = 0; i < d_model; ++i) h[i] *= inv;
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

#if REPLAYSSM_CUDA_COMPILER
template <class Piece>
__global__ void rows_kernel(rows_view v, int rows, Piece piece) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) piece(v, r);
}
#endif

/// Where buffers live and how the steps run: host memory and the CPU path, or the GPU.
class backend {
 public:
  explicit backend(bool cuda) : cuda_(cuda) {
    if (cuda_) flags_ = array<uint32_t>(1);
  }
  backend(const backend&) = delete;
  backend& operator=(const backend&) = delete;
  ~backend() {
    for (void* p : owned_) release(p);
  }

  /// A zeroed buffer of `bytes` bytes, 256-byte aligned.
  void* allocate(size_t bytes) {
    void* p = nullptr;
    bytes = std::max<size_t>(bytes, 1);
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) {
      check(cudaMalloc(&p, bytes), "cudaMalloc");
      owned_.push_back(p);
      check(cudaMemset(p, 0, bytes), "cudaMemset");
      return p;
    }
#endif
    p = ::operator new(bytes, std::align_val_t(256));
    owned_.push_back(p);
    std::memset(p, 0, bytes);
    return p;
  }
  template <class T>
  T* array(size_t n) {
    return static_cast<T*>(allocate(n * sizeof(T)));
  }
  template <class T>
  T* upload(const std::vector<T>& v) {
    T* p = array<T>(v.size());
    upload(p, v);
    return p;
  }
  template <class T>
  void upload(T* to, const std::vector<T>& v) const {
    copy(to, v.data(), v.size() * sizeof(T));
  }
  template <class T>
  std::vector<T> download(const T* p, size_t n) const {
    std::vector<T> v(n);
    copy(v.data(), p, n * sizeof(T));
    return v;
  }

  /// Runs `piece(view, r)` for every row r.
  template <class Piece>
  void for_each_row(const rows_view& v, int rows, Piece piece) const {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) {
      rows_kernel<<<(rows + 63) / 64, 64>>>(v, rows, piece);
      return check(cudaGetLastError(), "per-row kernel");
    }
#endif
    for (int r = 0; r < rows; ++r) piece(v, r);
  }

  // The library's steps. Launchers return a status; an error becomes an exception here.
  void verify(const mamba2_params& p) const {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) return cuda::replay_verify_step<spec_mode>(p).throw_if_error();
#endif
    cpu::replay_verify_step<spec_mode>(p).throw_if_error();
  }
  void commit(const mamba2_params& p) const {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) return cuda::commit_drafts(p).throw_if_error();
#endif
    cpu::commit_drafts(p).throw_if_error();
  }
  void sequential_step(const mamba2_params& p) const {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) return cuda::naive_decode_step<fp32_format>(p).throw_if_error();
#endif
    cpu::naive_decode_step<fp32_format>(p).throw_if_error();
  }

  /// Device memory the CUDA steps report skipped rows in (null on the CPU, whose steps
  /// return those errors as their status).
  uint32_t* error_flags() const {
    return flags_;
  }

  /// Waits for the queued work; on the GPU also reads and clears the steps' error flags.
  void finish() const {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) {
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      cuda::take_step_errors(flags_).throw_if_error();
    }
#endif
  }

 private:
  void copy(void* to, const void* from, size_t bytes) const {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) return check(cudaMemcpy(to, from, bytes, cudaMemcpyDefault), "cudaMemcpy");
#endif
    std::memcpy(to, from, bytes);
  }
  void release(void* p) {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) {
      cudaFree(p);
      return;
    }
#endif
    ::operator delete(p, std::align_val_t(256));
  }
#if REPLAYSSM_CUDA_COMPILER
  static void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
  }
#endif
  bool cuda_;
  std::vector<void*> owned_;
  uint32_t* flags_ = nullptr;
};

/// Weights shared by both stacks, drawn from a fixed seed (the distributions of decode_loop).
struct weights {
  std::vector<float> A, D, dt_bias;       // [layers][heads]
  std::vector<float> embed, z, bc, dt;    // the tables of rows_view
  std::vector<std::vector<float>> state;  // [layers] -> [batch][heads][head_dim][state_dim], as after a prefill

  explicit weights(const options& o) {
    std::mt19937_64 rng(o.seed);
    std::normal_distribution<float> unit(0.0f, 1.0f), raw_dt(0.0f, 0.3f), small(0.0f, 0.5f);
    std::uniform_real_distribution<float> log_a(0.0f, std::log(16.0f)), log_dt(std::log(1e-3f), std::log(1e-1f));
    const auto& s = o.shape;
    const size_t d = size_t(s.heads) * s.head_dim, gn = size_t(s.groups) * s.state_dim;
    for (int i = 0; i < o.layers * s.heads; ++i) {
      A.push_back(-std::exp(log_a(rng)));
      D.push_back(1.0f);
      dt_bias.push_back(std::log(std::expm1(std::exp(log_dt(rng)))));  // softplus^-1 of dt0
    }
    auto fill = [&](std::vector<float>& v, size_t n, std::normal_distribution<float>& dist) {
      v.resize(n);
      for (auto& e : v) e = dist(rng);
    };
    fill(embed, size_t(o.vocab) * d, unit);
    fill(z, size_t(o.layers) * o.vocab * d, unit);
    fill(bc, size_t(o.layers) * o.vocab * 2 * gn, unit);
    fill(dt, size_t(o.layers) * o.vocab * s.heads, raw_dt);
    state.resize(size_t(o.layers));
    for (auto& st : state) fill(st, size_t(o.batch) * s.state_elements(), small);
  }
};

/// The weights where the steps run: the tables in a rows_view, and the per-head weights.
struct uploaded_weights {
  rows_view tables;
  const float *A, *D, *dt_bias;

  uploaded_weights(backend& be, const options& o, const weights& w)
      : A(be.upload(w.A)), D(be.upload(w.D)), dt_bias(be.upload(w.dt_bias)) {
    const auto& s = o.shape;
    tables.d_model = s.heads * s.head_dim;
    tables.vocab = o.vocab;
    tables.heads = s.heads;
    tables.gn = s.groups * s.state_dim;
    tables.embed = be.upload(w.embed);
    tables.z_table = be.upload(w.z);
    tables.bc_table = be.upload(w.bc);
    tables.dt_table = be.upload(w.dt);
  }
};

/// One stack of layers with its own state: `tokens` rows per request (request b's token t is
/// row b * tokens + t) and every layer's params.
struct layer_stack {
  rows_view view;
  int rows = 0;
  std::vector<mamba2_params> layers;

  /// Embeds the rows' tokens and runs every layer: its inputs, `step(params)`, the residual.
  template <class Step>
  void forward(const backend& be, Step step) const {
    be.for_each_row(view, rows, embed_piece{});
    for (size_t l = 0; l < layers.size(); ++l) {
      be.for_each_row(view, rows, inputs_piece{int(l)});
      step(layers[l]);
      be.for_each_row(view, rows, residual_piece{static_cast<const float*>(layers[l].y)});
    }
  }
  const float* y(int layer) const { return static_cast<const float*>(layers[size_t(layer)].y); }
};

/// A stack under `Policy` with `tokens` rows per request (a verify step's drafts, or 1 for
/// decode steps), every layer starting from its prefill state.
template <class Policy>
layer_stack make_stack(backend& be, const options& o, const weights& w, const uploaded_weights& uw, int tokens) {
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
    mamba2_params p = contiguous_mamba2_params(s, o.batch, dtype::f32, tokens);
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
    p.checkpoint = be.upload(w.state[size_t(l)]);
    if constexpr (!Policy::is_writeback) {
      p.window_entries = Policy::window + tokens;
      p.window_x = be.allocate(sizes.window_x);
      p.window_B = be.allocate(sizes.window_B);
      p.window_dt = static_cast<float*>(be.allocate(sizes.window_dt));
      p.cursors = static_cast<replay_cursor*>(be.allocate(sizes.cursors));
    }
    p.error_flags = be.error_flags();
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

  const weights w(o);
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
    spec.forward(be, [&](const mamba2_params& p) { be.verify(p); });
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
      seq.forward(be, [&](const mamba2_params& p) { be.sequential_step(p); });
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
  uint32_t fewest = cursors[0].flushes;
  for (size_t b = 0; b < batch; ++b) fewest = std::min(fewest, cursors[b * size_t(s.heads)].flushes);
  std::printf("window flushes (layer 0): at least %u per request during the run\n", fewest);
  std::printf("spec_vs_sequential_max_rel_err=%.3e rounds=%d mean_accepted=%.3f snapshot_bytes_avoided=%zu\n", max_err,
              o.rounds, mean_accepted, snapshots);
  return max_err <= tolerance ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  if (!parse(argc, argv, o)) {
    usage();
    return 2;
  }
#if !REPLAYSSM_CUDA_COMPILER
  if (o.device == "cuda") {
    std::fprintf(stderr, "this build has no CUDA support: rebuild with nvcc available, or use --device cpu\n");
    return 2;
  }
#else
  int devices = 0;
  if (o.device == "cuda" && (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)) {
    std::fprintf(stderr, "--device cuda: no CUDA device is present\n");
    return 2;
  }
#endif
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
