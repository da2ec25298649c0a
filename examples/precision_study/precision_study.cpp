// SPDX-License-Identifier: Apache-2.0
// Accuracy study of the read-copy and checkpoint precisions, on the CPU path.
//
// One small Mamba-2 layer (batch 1) runs a long sequence under every studied policy, all
// from the same initial state and on the same step inputs, beside a float64 reference of
// the conventional step. At marks along the sequence (16, 64, 256, ... steps, and the last
// step) it records the output relative error ||y - y_ref|| / ||y_ref||, per head over its
// P outputs, averaged over the steps since the previous mark: the mean over heads and the
// worst head. It prints the tables to stdout and writes them as CSV:
//
//   mode,read,checkpoint,rounding,step,mean_rel_err,worst_head_rel_err
//
// The skip term D x is off by default (D = 0), so that the error measured is the state
// term's alone; the gate silu(z) is off by default as well. It exits non-zero when the fp32
// modes disagree with the float64 reference by more than float rounding.
#include <replayssm/replayssm.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace replayssm;

namespace {

constexpr int window = 16;

struct options {
  int steps = 16384;
  mamba2_layer_shape shape{8, 64, 64, 1};
  int slow_heads = 2;
  int prefill = 4096;
  double init_std = 0.0;  // > 0: i.i.d. N(0, init_std^2) initial state instead of a prefill
  float D = 0.0f;
  bool gate = false;
  uint64_t seed = 2026;
  int threads = 0;
  std::string csv = "precision_study.csv";
};

void usage() {
  std::printf(
      "usage: precision_study [--steps T] [--csv PATH] [--heads H] [--head-dim P] [--state-dim N]\n"
      "                       [--slow-heads S] [--prefill T0 | --init-std SIGMA] [--D d] [--gate]\n"
      "                       [--seed S] [--threads K]\n");
}

bool parse(int argc, char** argv, options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--steps") o.steps = std::atoi(value().c_str());
    else if (a == "--csv") o.csv = value();
    else if (a == "--heads") o.shape.heads = std::atoi(value().c_str());
    else if (a == "--head-dim") o.shape.head_dim = std::atoi(value().c_str());
    else if (a == "--state-dim") o.shape.state_dim = std::atoi(value().c_str());
    else if (a == "--slow-heads") o.slow_heads = std::atoi(value().c_str());
    else if (a == "--prefill") o.prefill = std::atoi(value().c_str());
    else if (a == "--init-std") o.init_std = std::atof(value().c_str());
    else if (a == "--D") o.D = float(std::atof(value().c_str()));
    else if (a == "--gate") o.gate = true;
    else if (a == "--seed") o.seed = std::strtoull(value().c_str(), nullptr, 10);
    else if (a == "--threads") o.threads = std::atoi(value().c_str());
    else return false;
  }
  const auto& s = o.shape;
  return o.steps > 0 && s.heads > 0 && s.head_dim > 0 && s.state_dim >= 16 && s.state_dim % 16 == 0 &&
         o.slow_heads >= 0 && o.slow_heads <= s.heads && o.prefill >= 0 && o.init_std >= 0.0 && o.threads >= 0 &&
         !o.csv.empty();
}

/// The layer's weights and the whole input sequence, drawn once and shared by every run.
///
/// Statistics as at Mamba initialization: A = -exp(A_log) with A_log uniform in
/// [log 1, log 16]; dt = softplus(raw + bias), bias the inverse softplus of a log-uniform dt
/// in [1e-3, 1e-1], raw ~ N(0, 0.1^2); unit-variance x, B, C (and z). The first
/// `slow_heads` heads are slow: A_log in [log 1, log 1.25] and dt in [1e-3, 1.25e-3], so
/// their state decays with a time constant 1 / (dt |A|) of 640 to 1000 steps.
struct problem {
  mamba2_layer_shape shape;
  int steps = 0;
  int slow_heads = 0;
  std::vector<float> A, D, dt_bias, dt_target;  // [H]
  std::vector<float> x, z, dt, B, C;             // [steps][...]
  std::vector<float> initial_state;              // [H][P][N]

  size_t x_size() const { return size_t(shape.heads) * shape.head_dim; }
  size_t b_size() const { return size_t(shape.groups) * shape.state_dim; }
  bool slow(int h) const { return h < slow_heads; }
};

void draw_weights(problem& pr, const options& o, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> unit_interval(0.0f, 1.0f);
  auto log_uniform = [&](float lo, float hi) {
    return std::exp(std::log(lo) + unit_interval(rng) * (std::log(hi) - std::log(lo)));
  };
  for (int h = 0; h < pr.shape.heads; ++h) {
    const bool slow = pr.slow(h);
    const float a = slow ? log_uniform(1.0f, 1.25f) : log_uniform(1.0f, 16.0f);
    const float dt = slow ? log_uniform(1e-3f, 1.25e-3f) : log_uniform(1e-3f, 1e-1f);
    pr.A.push_back(-a);
    pr.D.push_back(o.D);
    pr.dt_target.push_back(dt);
    pr.dt_bias.push_back(std::log(std::expm1(dt)));
  }
}

/// Appends `steps` steps of random inputs to `pr`'s sequence.
void draw_inputs(problem& pr, int steps, std::mt19937_64& rng) {
  std::normal_distribution<float> unit(0.0f, 1.0f), raw_dt(0.0f, 0.1f);
  auto append = [&](std::vector<float>& v, size_t n, std::normal_distribution<float>& dist) {
    for (size_t i = 0; i < n; ++i) v.push_back(dist(rng));
  };
  for (int t = 0; t < steps; ++t) {
    append(pr.x, pr.x_size(), unit);
    append(pr.z, pr.x_size(), unit);
    append(pr.dt, size_t(pr.shape.heads), raw_dt);
    append(pr.B, pr.b_size(), unit);
    append(pr.C, pr.b_size(), unit);
  }
}

/// Float64 state of the layer under the conventional step, written from the recurrence.
class reference_layer {
 public:
  reference_layer(const problem& pr, bool gate) : pr_(pr), gate_(gate), state_(size_t(pr.shape.state_elements())) {}

  std::vector<double>& state() { return state_; }
  const std::vector<double>& state() const { return state_; }

  /// Runs step `t` of `pr`'s sequence; writes y [H][P] when it is not null.
  void step(int t, double* y) {
    const auto& s = pr_.shape;
    const int heads_per_group = s.heads / s.groups;
    const float* x = pr_.x.data() + size_t(t) * pr_.x_size();
    const float* z = pr_.z.data() + size_t(t) * pr_.x_size();
    const float* B = pr_.B.data() + size_t(t) * pr_.b_size();
    const float* C = pr_.C.data() + size_t(t) * pr_.b_size();
    for (int h = 0; h < s.heads; ++h) {
      const int g = h / heads_per_group;
      const double v = double(pr_.dt[size_t(t) * s.heads + h]) + pr_.dt_bias[size_t(h)];
      const double dt = v > 30 ? v : std::log1p(std::exp(v));
      const double a = std::exp(dt * pr_.A[size_t(h)]);
      for (int p = 0; p < s.head_dim; ++p) {
        double* row = state_.data() + (size_t(h) * s.head_dim + p) * s.state_dim;
        const double xv = x[h * s.head_dim + p];
        double acc = 0;
        for (int n = 0; n < s.state_dim; ++n) {
          row[n] = a * row[n] + dt * xv * B[g * s.state_dim + n];
          acc += row[n] * C[g * s.state_dim + n];
        }
        if (y == nullptr) continue;
        double out = acc + double(pr_.D[size_t(h)]) * xv;
        if (gate_) out *= z[h * s.head_dim + p] / (1.0 + std::exp(-double(z[h * s.head_dim + p])));
        y[h * s.head_dim + p] = out;
      }
    }
  }

 private:
  const problem& pr_;
  bool gate_;
  std::vector<double> state_;  // [H][P][N]
};

/// Weights, the initial state and the studied sequence. The initial state is the float64
/// state after a prefill of `o.prefill` steps of the same statistics, or i.i.d.
/// N(0, init_std^2) with `--init-std`. With unit-variance x and B a head's state settles at
/// an RMS of about sqrt(dt^2 / (1 - exp(2 dt A))) ~ sqrt(dt / (2 |A|)), 0.006 to 0.22 over
/// the initialization ranges: a prefill of a few slow time constants reaches it, whereas an
/// i.i.d. state of RMS 0.5 is 2 to 90 times too large and decays toward it.
problem make_problem(const options& o) {
  std::mt19937_64 rng(o.seed);
  problem pr;
  pr.shape = o.shape;
  pr.slow_heads = o.slow_heads;
  draw_weights(pr, o, rng);
  const int prefill = o.init_std > 0.0 ? 0 : o.prefill;
  draw_inputs(pr, prefill, rng);
  reference_layer warmup(pr, o.gate);
  for (int t = 0; t < prefill; ++t) warmup.step(t, nullptr);
  std::normal_distribution<double> unit(0.0, 1.0);
  for (double v : warmup.state()) pr.initial_state.push_back(float(o.init_std > 0.0 ? o.init_std * unit(rng) : v));
  for (auto* v : {&pr.x, &pr.z, &pr.dt, &pr.B, &pr.C}) v->clear();
  draw_inputs(pr, o.steps, rng);
  pr.steps = o.steps;
  return pr;
}

/// 16, 64, 256, ... (16 times powers of 4) up to `steps`, and `steps` itself.
std::vector<int> marks_for(int steps) {
  std::vector<int> marks;
  for (long m = 16; m <= steps; m *= 4) marks.push_back(int(m));
  if (marks.empty() || marks.back() != steps) marks.push_back(steps);
  return marks;
}

/// Output error over the steps between two marks.
struct interval_error {
  int step;                     ///< the mark closing the interval
  double mean, worst;           ///< over heads of the per-head mean over the interval
  std::vector<double> per_head; ///< [H]
};

/// Accumulates per-head output relative errors and closes an interval at each mark.
class error_tracker {
 public:
  error_tracker(mamba2_layer_shape s, std::vector<int> marks)
      : shape_(s), marks_(std::move(marks)), sum_(size_t(s.heads), 0.0) {}

  /// Adds step `t` (0-based) with outputs y against y_ref, both [H][P].
  void add(int t, const float* y, const double* y_ref) {
    const int P = shape_.head_dim;
    for (int h = 0; h < shape_.heads; ++h) {
      double num = 0, den = 0;
      for (int p = h * P; p < (h + 1) * P; ++p) {
        num += (double(y[p]) - y_ref[p]) * (double(y[p]) - y_ref[p]);
        den += y_ref[p] * y_ref[p];
      }
      sum_[size_t(h)] += den > 0 ? std::sqrt(num / den) : std::sqrt(num);
    }
    ++count_;
    if (t + 1 == marks_[intervals_.size()]) close(t + 1);
  }

  const std::vector<interval_error>& intervals() const { return intervals_; }

 private:
  void close(int step) {
    interval_error e{step, 0.0, 0.0, {}};
    for (double& s : sum_) {
      const double head = s / count_;
      e.per_head.push_back(head);
      e.mean += head / shape_.heads;
      e.worst = std::max(e.worst, head);
      s = 0.0;
    }
    count_ = 0;
    intervals_.push_back(std::move(e));
  }

  mamba2_layer_shape shape_;
  std::vector<int> marks_;
  std::vector<double> sum_;
  int count_ = 0;
  std::vector<interval_error> intervals_;
};

/// Reference outputs of the whole sequence, [steps][H][P].
std::vector<double> reference_outputs(const problem& pr, bool gate, std::vector<double>& final_state) {
  reference_layer ref(pr, gate);
  for (size_t i = 0; i < pr.initial_state.size(); ++i) ref.state()[i] = pr.initial_state[i];
  std::vector<double> y(size_t(pr.steps) * pr.x_size());
  for (int t = 0; t < pr.steps; ++t) ref.step(t, y.data() + size_t(t) * pr.x_size());
  final_state = ref.state();
  return y;
}

/// 16-byte aligned storage: state planes are loaded a chunk at a time as vectors.
struct alignas(16) block16 {
  unsigned char bytes[16];
};

/// A zeroed plane of `bytes` bytes, or null for none.
void* plane(std::vector<block16>& storage, size_t bytes) {
  storage.assign((bytes + 15) / 16, block16{});
  return bytes == 0 ? nullptr : storage.data();
}

/// One layer's decode buffers for `Policy` (batch 1, slot 0), in host memory.
template <class Policy>
struct layer_buffers {
  std::vector<block16> checkpoint, checkpoint_scales, read_copy, read_copy_scales, window_x, window_B, window_dt;
  std::vector<replay_cursor> cursors;

  layer_buffers(const layer_buffers&) = delete;  // `p` points into these buffers
  layer_buffers& operator=(const layer_buffers&) = delete;

  /// Allocates the buffers, binds them to `p` and loads `state` ([H][P][N]) into them.
  layer_buffers(mamba2_params& p, mamba2_layer_shape s, const std::vector<float>& state) {
    const mamba2_buffer_sizes sizes = mamba2_buffers<Policy>(s, 1, dtype::f32);
    p.num_slots = 1;
    p.checkpoint = plane(checkpoint, sizes.checkpoint);
    p.checkpoint_scales = plane(checkpoint_scales, sizes.checkpoint_scales);
    p.read_copy = plane(read_copy, sizes.read_copy);
    p.read_copy_scales = plane(read_copy_scales, sizes.read_copy_scales);
    p.window_x = plane(window_x, sizes.window_x);
    p.window_B = plane(window_B, sizes.window_B);
    p.window_dt = static_cast<float*>(plane(window_dt, sizes.window_dt));
    cursors.assign(size_t(s.heads), replay_cursor{});
    p.cursors = cursors.data();
    load(p, s, state);
  }

 private:
  static void load(const mamba2_params& p, mamba2_layer_shape s, const std::vector<float>& state) {
    using ckpt_view = state_head_view<typename Policy::checkpoint_format>;
    using read_view = state_head_view<typename Policy::read_format>;
    const int32_t per_head = s.head_dim * s.state_dim;
    for (int h = 0; h < s.heads; ++h) {
      const ckpt_view ckpt = ckpt_view::in_pool(p.checkpoint, p.checkpoint_scales, h, per_head);
      const read_view read = Policy::shared_state ? read_view{}
                                                  : read_view::in_pool(p.read_copy, p.read_copy_scales, h, per_head);
      write_head_state<Policy>(serial_executor{}, state.data() + size_t(h) * per_head, per_head, ckpt, read);
    }
  }
};

/// Runs the whole sequence under `Policy` and returns its errors at the marks.
template <class Policy>
std::vector<interval_error> run_policy(const problem& pr, const std::vector<double>& y_ref, bool gate,
                                       const std::vector<int>& marks) {
  mamba2_params p = contiguous_mamba2_params(pr.shape, 1, dtype::f32);
  p.A = pr.A.data();
  p.D = pr.D.data();
  p.dt_bias = pr.dt_bias.data();
  p.seed = 0x5EEDull;
  layer_buffers<Policy> buffers(p, pr.shape, pr.initial_state);
  std::vector<float> y(pr.x_size());
  p.y = y.data();
  error_tracker tracker(pr.shape, marks);
  for (int t = 0; t < pr.steps; ++t) {
    p.x = pr.x.data() + size_t(t) * pr.x_size();
    p.z = gate ? pr.z.data() + size_t(t) * pr.x_size() : nullptr;
    p.dt = pr.dt.data() + size_t(t) * pr.shape.heads;
    p.B = pr.B.data() + size_t(t) * pr.b_size();
    p.C = pr.C.data() + size_t(t) * pr.b_size();
    cpu::mamba2_decode_step<Policy>(p).throw_if_error();
    tracker.add(t, y.data(), y_ref.data() + size_t(t) * pr.x_size());
  }
  return tracker.intervals();
}

/// One studied policy: its labels, memory and traffic, and how to run it.
struct study_entry {
  std::string mode, read, checkpoint, rounding, description;
  mamba2_buffer_sizes memory;
  double bytes_per_element_step;
  std::function<std::vector<interval_error>(const problem&, const std::vector<double>&, bool,
                                            const std::vector<int>&)>
      run;
  std::vector<interval_error> errors;
  std::string failure;

  std::string label() const {
    const std::string formats = mode == "separate" ? read + "/" + checkpoint : checkpoint;
    return mode + " " + formats + " " + rounding;
  }
};

template <class Policy>
study_entry make_entry(mamba2_layer_shape s) {
  study_entry e;
  e.mode = Policy::is_writeback ? "writeback" : (Policy::shared_state ? "shared" : "separate");
  e.read = Policy::read_format::name;
  e.checkpoint = Policy::checkpoint_format::name;
  e.rounding = Policy::rounding::is_stochastic ? "sr" : "rne";
  e.description = describe<Policy>();
  e.memory = mamba2_buffers<Policy>(s, 1, dtype::f32);
  e.bytes_per_element_step = state_traffic_per_step<Policy>().total();
  e.run = run_policy<Policy>;
  return e;
}

template <class... Policies>
struct policy_list {};

using rne = round_nearest_even;
using sr = round_stochastic;
template <class F, class Round>
using shared_mode = replay_policy<window, F, F, Round>;
template <class Read, class Checkpoint, class Round>
using separate_mode = replay_policy<window, Read, Checkpoint, Round>;

// Every combination replay_policy admits: a separate read copy is no wider than its
// checkpoint (fp32 read copies exist only as the shared fp32 mode).
using studied_policies = policy_list<
    writeback_policy<fp32_format, rne>,
    writeback_policy<fp16_format, rne>,
    writeback_policy<fp16_format, sr>,
    writeback_policy<bf16_format, rne>,
    writeback_policy<bf16_format, sr>,
    shared_mode<fp32_format, rne>,
    shared_mode<fp32_format, sr>,
    shared_mode<fp16_format, rne>,
    shared_mode<fp16_format, sr>,
    shared_mode<bf16_format, rne>,
    shared_mode<bf16_format, sr>,
    shared_mode<fp8_e4m3_format, rne>,
    shared_mode<fp8_e4m3_format, sr>,
    shared_mode<nvfp4_format, rne>,
    shared_mode<nvfp4_format, sr>,
    separate_mode<fp16_format, fp32_format, rne>,
    separate_mode<fp16_format, fp32_format, sr>,
    separate_mode<bf16_format, fp32_format, rne>,
    separate_mode<bf16_format, fp32_format, sr>,
    separate_mode<fp8_e4m3_format, fp32_format, rne>,
    separate_mode<fp8_e4m3_format, fp32_format, sr>,
    separate_mode<nvfp4_format, fp32_format, rne>,
    separate_mode<nvfp4_format, fp32_format, sr>,
    separate_mode<bf16_format, fp16_format, rne>,
    separate_mode<bf16_format, fp16_format, sr>,
    separate_mode<fp8_e4m3_format, fp16_format, rne>,
    separate_mode<fp8_e4m3_format, fp16_format, sr>,
    separate_mode<nvfp4_format, fp16_format, rne>,
    separate_mode<nvfp4_format, fp16_format, sr>,
    separate_mode<fp16_format, bf16_format, rne>,
    separate_mode<fp16_format, bf16_format, sr>,
    separate_mode<fp8_e4m3_format, bf16_format, rne>,
    separate_mode<fp8_e4m3_format, bf16_format, sr>,
    separate_mode<nvfp4_format, bf16_format, rne>,
    separate_mode<nvfp4_format, bf16_format, sr>>;

template <class... Policies>
std::vector<study_entry> make_entries(policy_list<Policies...>, mamba2_layer_shape s) {
  return {make_entry<Policies>(s)...};
}

/// Runs every entry, `threads` at a time (each entry owns its buffers; the inputs and the
/// reference outputs are shared read-only).
void run_all(std::vector<study_entry>& entries, const problem& pr, const std::vector<double>& y_ref, bool gate,
             const std::vector<int>& marks, int threads) {
  std::atomic<size_t> next{0};
  auto worker = [&]() {
    for (size_t i = next++; i < entries.size(); i = next++) {
      try {
        entries[i].errors = entries[i].run(pr, y_ref, gate, marks);
      } catch (const std::exception& ex) {
        entries[i].failure = ex.what();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
}

/// Root mean square of `n` values.
double rms(const double* v, size_t n) {
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += v[i] * v[i];
  return std::sqrt(sum / double(n));
}

/// Relative error ||Q(v) - v|| / ||v|| of `n` values (a multiple of 16) stored in NVFP4 with
/// nearest even after multiplication by `prescale`, a power of two (so exact), as a
/// per-tensor second-level scale would do.
double nvfp4_error(const double* v, size_t n, float prescale) {
  double num = 0, den = 0;
  for (size_t b = 0; b < n; b += 16) {
    float in[16], out[16];
    alignas(8) uint8_t data[8];
    uint8_t scale[1];
    for (int e = 0; e < 16; ++e) in[e] = float(v[b + e]) * prescale;
    nvfp4_format::encode<round_nearest_even>(in, nullptr, data, scale);
    nvfp4_format::decode(data, scale, out);
    for (int e = 0; e < 16; ++e) {
      num += (double(out[e] / prescale) - v[b + e]) * (double(out[e] / prescale) - v[b + e]);
      den += v[b + e] * v[b + e];
    }
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

/// Per-head state statistics of `state` ([H][P][N]): RMS, mean block amax over blocks of
/// 16, the share of blocks whose NVFP4 (UE4M3) scale is subnormal (amax < 6 * 2^-6) or at
/// its floor (amax <= 6 * 2^-9), and the NVFP4 storage error as is and with a 2^6 prescale.
void print_state_table(const problem& pr, const std::vector<double>& initial,
                       const std::vector<double>& final_state) {
  const auto& s = pr.shape;
  const size_t per_head = size_t(s.head_dim) * s.state_dim;
  std::printf("\nstate magnitudes per head (initial state, and float64 reference state at step %d)\n", pr.steps);
  std::printf("%-5s %-5s %8s %9s %10s %10s %10s %11s %12s %11s %10s %12s\n", "head", "kind", "A", "dt", "tau steps",
              "rms init", "rms final", "block amax", "subnormal %", "at floor %", "nvfp4 err", "x2^6 nvfp4");
  for (int h = 0; h < s.heads; ++h) {
    const double* v = final_state.data() + size_t(h) * per_head;
    double amax_sum = 0;
    int subnormal = 0, floored = 0;
    const int blocks = int(per_head / 16);
    for (int b = 0; b < blocks; ++b) {
      double amax = 0;
      for (int e = 0; e < 16; ++e) amax = std::max(amax, std::fabs(v[b * 16 + e]));
      amax_sum += amax;
      subnormal += amax < 6.0 * std::ldexp(1.0, -6);
      floored += amax <= 6.0 * std::ldexp(1.0, -9);
    }
    const double tau = 1.0 / (double(pr.dt_target[size_t(h)]) * -pr.A[size_t(h)]);
    std::printf("%-5d %-5s %8.3f %9.2e %10.1f %10.3e %10.3e %11.3e %12.1f %11.1f %10.3e %12.3e\n", h,
                pr.slow(h) ? "slow" : "fast", pr.A[size_t(h)], pr.dt_target[size_t(h)], tau,
                rms(initial.data() + size_t(h) * per_head, per_head), rms(v, per_head), amax_sum / blocks,
                100.0 * subnormal / blocks, 100.0 * floored / blocks, nvfp4_error(v, per_head, 1.0f),
                nvfp4_error(v, per_head, 64.0f));
  }
}

/// NVFP4 storage error of i.i.d. N(0, sigma^2) blocks against sigma: as is, and with the
/// power-of-two prescale that brings sigma near 0.5 (what a per-tensor scale would do).
void print_nvfp4_range_table() {
  std::printf("\nNVFP4 (nearest-even) storage error of N(0, sigma^2) values, 4096 blocks each\n");
  std::printf("%10s %10s %14s\n", "sigma", "as is", "prescaled");
  std::mt19937_64 rng(1);
  std::normal_distribution<double> unit(0.0, 1.0);
  for (double sigma : {0.1, 0.03, 0.01, 0.003, 0.002, 0.001, 0.0005}) {
    std::vector<double> v(4096 * 16);
    for (double& e : v) e = sigma * unit(rng);
    const float prescale = std::ldexp(1.0f, int(std::lround(std::log2(0.5 / sigma))));
    std::printf("%10.4f %10.4f %14.4f\n", sigma, nvfp4_error(v.data(), v.size(), 1.0f),
                nvfp4_error(v.data(), v.size(), prescale));
  }
}

void print_policy_table(const std::vector<study_entry>& entries) {
  std::printf("\nmodes (memory per request per layer in bytes, f32 activations; modelled state bytes per\n"
              "element per step)\n");
  std::printf("%-3s %-28s %-64s %9s %9s %8s %8s\n", "#", "label", "describe()", "ckpt B", "read B", "window B",
              "B/el/st");
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    std::printf("%-3zu %-28s %-64s %9zu %9zu %8zu %8.4f\n", i, e.label().c_str(), e.description.c_str(),
                e.memory.checkpoint_total(), e.memory.read_copy_total(), e.memory.window_total(),
                e.bytes_per_element_step);
  }
}

void print_error_table(const std::vector<study_entry>& entries, const std::vector<int>& marks) {
  std::printf("\nmean over heads of the output relative error, per interval ending at step\n");
  std::printf("%-3s %-28s", "#", "label");
  for (int m : marks) std::printf(" %9d", m);
  std::printf(" %11s\n", "worst head");
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    std::printf("%-3zu %-28s", i, e.label().c_str());
    for (const auto& iv : e.errors) std::printf(" %9.2e", iv.mean);
    std::printf(" %11.2e\n", e.errors.back().worst);
  }
}

void print_head_table(const std::vector<study_entry>& entries, const problem& pr) {
  std::printf("\noutput relative error per head over the last interval (s: slow head, f: fast head)\n");
  std::printf("%-3s %-28s", "#", "label");
  for (int h = 0; h < pr.shape.heads; ++h) std::printf(" %8d%c", h, pr.slow(h) ? 's' : 'f');
  std::printf("\n");
  for (size_t i = 0; i < entries.size(); ++i) {
    std::printf("%-3zu %-28s", i, entries[i].label().c_str());
    for (double v : entries[i].errors.back().per_head) std::printf(" %9.2e", v);
    std::printf("\n");
  }
}

void write_csv(const std::string& path, const std::vector<study_entry>& entries) {
  std::ofstream f(path);
  f << "mode,read,checkpoint,rounding,step,mean_rel_err,worst_head_rel_err\n";
  char line[256];
  for (const auto& e : entries) {
    for (const auto& iv : e.errors) {
      std::snprintf(line, sizeof line, "%s,%s,%s,%s,%d,%.6e,%.6e\n", e.mode.c_str(), e.read.c_str(),
                    e.checkpoint.c_str(), e.rounding.c_str(), iv.step, iv.mean, iv.worst);
      f << line;
    }
  }
  if (!f) throw std::runtime_error("cannot write " + path);
}

/// The fp32 modes must agree with the float64 reference to float rounding; more is a defect
/// of the library or of the reference.
bool fp32_modes_agree(const std::vector<study_entry>& entries) {
  double worst = 0;
  for (const auto& e : entries) {
    if (e.read != "fp32" || e.checkpoint != "fp32") continue;
    for (const auto& iv : e.errors) worst = std::max(worst, iv.worst);
  }
  std::printf("fp32 modes against the float64 reference: worst head %.2e (limit 1e-4)\n", worst);
  return worst <= 1e-4;
}

int run(const options& o) {
  const auto start = std::chrono::steady_clock::now();
  const auto& s = o.shape;
  const int threads = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  std::printf("layer: 1 Mamba-2 layer, %d heads (%d slow) x %d x %d, %d group, batch 1, %d steps, W=%d, cpu\n",
              s.heads, o.slow_heads, s.head_dim, s.state_dim, s.groups, o.steps, window);
  std::printf("inputs: f32; D=%g (%s), gate %s; initial state: %s\n", double(o.D),
              o.D == 0.0f ? "the error is the state term's alone" : "skip term included",
              o.gate ? "on" : "off",
              o.init_std > 0.0 ? ("i.i.d. N(0, " + std::to_string(o.init_std) + "^2)").c_str()
                               : ("float64 prefill of " + std::to_string(o.prefill) + " steps").c_str());

  const problem pr = make_problem(o);
  std::vector<double> final_state;
  const std::vector<double> y_ref = reference_outputs(pr, o.gate, final_state);
  const std::vector<double> initial(pr.initial_state.begin(), pr.initial_state.end());
  print_state_table(pr, initial, final_state);
  print_nvfp4_range_table();

  const std::vector<int> marks = marks_for(o.steps);
  std::vector<study_entry> entries = make_entries(studied_policies{}, s);
  run_all(entries, pr, y_ref, o.gate, marks, threads);
  for (const auto& e : entries)
    if (!e.failure.empty()) throw std::runtime_error(e.description + ": " + e.failure);

  print_policy_table(entries);
  print_error_table(entries, marks);
  print_head_table(entries, pr);
  write_csv(o.csv, entries);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\nwrote %s (%zu modes x %zu marks); %.1f s on %d threads\n", o.csv.c_str(), entries.size(),
              marks.size(), seconds, threads);
  return fp32_modes_agree(entries) ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  if (!parse(argc, argv, o)) {
    usage();
    return 2;
  }
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
