// SPDX-License-Identifier: Apache-2.0
// Accuracy study of the read-copy and checkpoint precisions, on the CPU path.
//
// `--model mamba2` (the default): one small Mamba-2 layer (batch 1) runs a long sequence
// under every studied policy, all from the same initial state and on the same step inputs,
// beside a float64 reference of the conventional step. At marks along the sequence (16, 64,
// 256, ... steps, and the last step) it records the output relative error
// ||y - y_ref|| / ||y_ref||, per head over its P outputs, averaged over the steps since the
// previous mark: the mean over heads and the worst head. It prints the tables to stdout
// and writes them as CSV:
//
//   mode,read,checkpoint,rounding,step,mean_rel_err,worst_head_rel_err
//
// The skip term D x is off by default (D = 0), so that the error measured is the state
// term's alone; the gate silu(z) is off by default as well.
//
// `--model gdn`: one Gated DeltaNet layer of the Qwen3.5-4B shape (32 value heads, 16 key
// heads, K = V = 128) on bf16 inputs over 2048 steps, the same way, each replay policy in
// both window modes (gdn_window::corrected_values and raw_inputs). It also compares the
// decoded checkpoint at the marks with the float64 reference state it holds (a write-back
// checkpoint every token, a replay checkpoint the tokens before its window's entries, as its
// last flush left them): ||S_h - S_ref,h|| / ||S_ref,h|| per head over its V x K values. CSV:
//
//   mode,read,checkpoint,rounding,window_mode,step,mean_rel_err,worst_head_rel_err,
//   mean_ckpt_rel_err,worst_head_ckpt_rel_err
//
// It exits non-zero when the fp32 modes disagree with the float64 reference by more than
// float rounding.
#include <replayssm/replayssm.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "../common/args.hpp"

using namespace replayssm;
namespace args = replayssm_example::args;

namespace {

constexpr int window = 16;

struct options {
  std::string model = "mamba2";  // or "gdn"
  int steps = -1;                // -1: the model's default (16384 Mamba-2, 2048 GDN)
  mamba2_layer_shape shape{8, 64, 64, 1};
  gdn_layer_shape gdn_shape{32, 16, 128, 128};  // Qwen3.5-4B: HV, HK, K, V
  int slow_heads = -1;  // -1: the model's default (a quarter of the heads)
  int prefill = -1;     // -1: the model's default (4096 Mamba-2, 1024 GDN)
  double init_std = 0.0;  // > 0: i.i.d. N(0, init_std^2) initial state instead of a prefill
  float D = 0.0f;
  bool gate = false;
  bool bf16_act = false;  // GDN: pass the (bf16) activations as bf16, output included
  uint64_t seed = 2026;
  int threads = 0;
  std::string csv = "precision_study.csv";

  bool gdn() const { return model == "gdn"; }
};

const std::string usage_text =
    "usage: precision_study [--model mamba2|gdn] [--steps T] [--csv PATH] [--slow-heads S]\n"
    "                       [--prefill T0 | --init-std SIGMA] [--seed S] [--threads K]\n"
    "  mamba2: [--heads H] [--head-dim P] [--state-dim N] [--D d] [--gate]\n"
    "  gdn:    [--value-heads HV] [--key-heads HK] [--key-dim K] [--value-dim V] [--bf16-act]\n"
    "          (T a multiple of 16)\n"
    "ranges: --steps [1, 16777216] (default 16384 mamba2, 2048 gdn); --slow-heads [0, heads] (default\n"
    "2 mamba2, a quarter of HV gdn); --prefill [0, 16777216] (default 4096 mamba2, 1024 gdn);\n"
    "--init-std [0, 1e6]; --threads [0, 1024] (0: every core); --heads, --value-heads, --key-heads\n"
    "[1, 1024] (HV a multiple of HK); --head-dim [1, " + std::to_string(max_head_dim) +
    "]; --state-dim a multiple of 16 in [16, " + std::to_string(max_state_dim) +
    "];\n--key-dim a multiple of 16 in [16, " + std::to_string(gdn_max_key_dim) + "]; --value-dim [1, " +
    std::to_string(gdn_max_value_dim) + "]; --D [-1e6, 1e6].\n";

/// Parses the options and checks, before any work, the shape and the CSV path. Returns
/// args::proceed or the exit code.
int parse(int argc, char** argv, options& o) {
  args::parser cli("precision_study", usage_text);
  cli.choice("--model", o.model, {"mamba2", "gdn"});
  cli.integer("--steps", o.steps, 1, 1 << 24);
  cli.text("--csv", o.csv);
  cli.integer("--heads", o.shape.heads, 1, 1024);
  cli.integer("--head-dim", o.shape.head_dim, 1, max_head_dim);
  cli.integer("--state-dim", o.shape.state_dim, 16, max_state_dim);
  cli.integer("--value-heads", o.gdn_shape.value_heads, 1, 1024);
  cli.integer("--key-heads", o.gdn_shape.key_heads, 1, 1024);
  cli.integer("--key-dim", o.gdn_shape.key_dim, 16, gdn_max_key_dim);
  cli.integer("--value-dim", o.gdn_shape.value_dim, 1, gdn_max_value_dim);
  cli.flag("--bf16-act", o.bf16_act);
  cli.integer("--slow-heads", o.slow_heads, 0, 1024);
  cli.integer("--prefill", o.prefill, 0, 1 << 24);
  cli.real("--init-std", o.init_std, 0.0, 1e6);
  double D = 0.0;  // read as a double and rounded to float, as before
  cli.real("--D", D, -1e6, 1e6);
  cli.flag("--gate", o.gate);
  cli.integer<uint64_t>("--seed", o.seed, 0, UINT64_MAX);
  cli.integer("--threads", o.threads, 0, 1024);
  if (const int code = cli.parse(argc, argv); code != args::proceed) return code;
  o.D = float(D);

  // Options of the other model are mistakes, not no-ops.
  for (const char* name : o.gdn() ? std::vector<const char*>{"--heads", "--head-dim", "--state-dim", "--D", "--gate"}
                                  : std::vector<const char*>{"--value-heads", "--key-heads", "--key-dim",
                                                             "--value-dim", "--bf16-act"})
    if (cli.given(name)) return cli.error(std::string(name) + ": not an option of --model " + o.model);
  if (cli.given("--prefill") && cli.given("--init-std"))
    return cli.error("--prefill and --init-std: give one or the other");
  const int heads = o.gdn() ? o.gdn_shape.value_heads : o.shape.heads;
  if (o.steps == -1) o.steps = o.gdn() ? 2048 : 16384;
  if (o.slow_heads == -1) o.slow_heads = o.gdn() ? heads / 4 : 2;
  if (o.prefill == -1) o.prefill = o.gdn() ? 1024 : 4096;
  if (o.slow_heads > heads)
    return cli.error("--slow-heads: expected an integer in [0, " + std::to_string(heads) + "] (the heads), got '" +
                     std::to_string(o.slow_heads) + "'");
  if (o.gdn()) {
    const auto& g = o.gdn_shape;
    if (g.value_heads % g.key_heads != 0)
      return cli.error("--value-heads " + std::to_string(g.value_heads) + " is not a multiple of --key-heads " +
                       std::to_string(g.key_heads));
    if (g.key_dim % 16 != 0)
      return cli.error("--key-dim: expected a multiple of 16, got '" + std::to_string(g.key_dim) + "'");
    if (o.steps % window != 0)
      return cli.error("--steps: expected a multiple of " + std::to_string(window) + " with --model gdn, got '" +
                       std::to_string(o.steps) + "'");
  } else if (o.shape.state_dim % 16 != 0) {
    return cli.error("--state-dim: expected a multiple of 16, got '" + std::to_string(o.shape.state_dim) + "'");
  }
  return cli.check_writable_file("--csv", o.csv);
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

/// A head's decay rate |A| and time step dt (the softplus of raw input + bias) as at Mamba
/// initialization: |A| log-uniform in [1, 16] and dt in [1e-3, 1e-1]; a slow head's in
/// [1, 1.25] and [1e-3, 1.25e-3], a decay time constant 1 / (dt |A|) of 640 to 1000 steps.
struct head_rate {
  float a, dt;
};

head_rate draw_head_rate(bool slow, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> unit_interval(0.0f, 1.0f);
  auto log_uniform = [&](float lo, float hi) {
    return std::exp(std::log(lo) + unit_interval(rng) * (std::log(hi) - std::log(lo)));
  };
  const float a = slow ? log_uniform(1.0f, 1.25f) : log_uniform(1.0f, 16.0f);
  const float dt = slow ? log_uniform(1e-3f, 1.25e-3f) : log_uniform(1e-3f, 1e-1f);
  return {a, dt};
}

void draw_weights(problem& pr, const options& o, std::mt19937_64& rng) {
  for (int h = 0; h < pr.shape.heads; ++h) {
    const auto [a, dt] = draw_head_rate(pr.slow(h), rng);
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

/// The initial state: `reference`'s after the first `prefill` steps of the sequence drawn so
/// far (from zero), or i.i.d. N(0, init_std^2) when init_std > 0.
template <class Reference>
std::vector<float> initial_state(Reference& reference, int prefill, double init_std, std::mt19937_64& rng) {
  for (int t = 0; t < prefill; ++t) reference.step(t, nullptr);
  std::normal_distribution<double> unit(0.0, 1.0);
  std::vector<float> state;
  for (double v : reference.state()) state.push_back(float(init_std > 0.0 ? init_std * unit(rng) : v));
  return state;
}

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
  pr.initial_state = initial_state(warmup, prefill, o.init_std, rng);
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

/// Per-head errors at a mark: of the outputs over the steps since the previous mark, or of
/// the checkpoint at the mark.
struct interval_error {
  int step;                     ///< the mark closing the interval
  double mean, worst;           ///< over heads
  std::vector<double> per_head; ///< [H]

  /// The mean and worst of `per_head`.
  static interval_error of(int step, std::vector<double> per_head) {
    interval_error e{step, 0.0, 0.0, std::move(per_head)};
    for (double head : e.per_head) {
      e.mean += head / double(e.per_head.size());
      e.worst = std::max(e.worst, head);
    }
    return e;
  }
};

/// Relative error ||y - ref|| / ||ref|| of `n` values (the absolute error when ref is 0).
double relative_error(const float* y, const double* ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; ++i) {
    num += (double(y[i]) - ref[i]) * (double(y[i]) - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

/// Relative error of each of `heads` heads of `per_head` values: y against ref, [heads][per_head].
std::vector<double> head_errors(const float* y, const double* ref, int heads, size_t per_head) {
  std::vector<double> e;
  for (int h = 0; h < heads; ++h) e.push_back(relative_error(y + h * per_head, ref + h * per_head, per_head));
  return e;
}

/// Accumulates per-head output relative errors and closes an interval at each mark.
class error_tracker {
 public:
  /// `heads` heads of `width` outputs each.
  error_tracker(int heads, int width, std::vector<int> marks)
      : heads_(heads), width_(size_t(width)), marks_(std::move(marks)), sum_(size_t(heads), 0.0) {}

  /// Adds step `t` (0-based) with outputs y against y_ref, both [heads][width].
  void add(int t, const float* y, const double* y_ref) {
    const std::vector<double> e = head_errors(y, y_ref, heads_, width_);
    for (int h = 0; h < heads_; ++h) sum_[size_t(h)] += e[size_t(h)];
    ++count_;
    if (t + 1 == marks_[intervals_.size()]) close(t + 1);
  }

  const std::vector<interval_error>& intervals() const { return intervals_; }

 private:
  void close(int step) {
    std::vector<double> per_head;
    for (double& s : sum_) {
      per_head.push_back(s / count_);
      s = 0.0;
    }
    count_ = 0;
    intervals_.push_back(interval_error::of(step, std::move(per_head)));
  }

  int heads_;
  size_t width_;
  std::vector<int> marks_;
  std::vector<double> sum_;
  int count_ = 0;
  std::vector<interval_error> intervals_;
};

/// The float64 reference over the studied sequence: its outputs and its state after some steps.
struct reference_run {
  std::vector<double> outputs;                     ///< [steps][outputs per step]
  std::map<int, std::vector<double>> states;  ///< the state after t steps, for each t asked
};

/// Runs `ref` over `steps` steps of `outputs` outputs from `initial`, keeping the state after
/// each number of steps in `state_steps` (0: the initial state).
template <class Reference>
reference_run run_reference(Reference& ref, const std::vector<float>& initial, int steps, size_t outputs,
                            const std::set<int>& state_steps) {
  for (size_t i = 0; i < initial.size(); ++i) ref.state()[i] = initial[i];
  reference_run r;
  r.outputs.resize(size_t(steps) * outputs);
  if (state_steps.count(0) > 0) r.states[0] = ref.state();
  for (int t = 0; t < steps; ++t) {
    ref.step(t, r.outputs.data() + size_t(t) * outputs);
    if (state_steps.count(t + 1) > 0) r.states[t + 1] = ref.state();
  }
  return r;
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
  layer_buffers(mamba2_params<float>& p, mamba2_layer_shape s, const std::vector<float>& state) {
    const mamba2_buffer_sizes sizes = mamba2_buffers<Policy>(s, 1, dtype::f32);
    p.num_slots = 1;
    p.checkpoint = plane(checkpoint, sizes.checkpoint);
    p.checkpoint_scales = plane(checkpoint_scales, sizes.checkpoint_scales);
    p.read_copy = plane(read_copy, sizes.read_copy);
    p.read_copy_scales = plane(read_copy_scales, sizes.read_copy_scales);
    p.window_x = static_cast<float*>(plane(window_x, sizes.window_x));
    p.window_B = static_cast<float*>(plane(window_B, sizes.window_B));
    p.window_dt = static_cast<float*>(plane(window_dt, sizes.window_dt));
    cursors.assign(size_t(s.heads), replay_cursor{});
    p.cursors = cursors.data();
    load(p, s, state);
  }

 private:
  static void load(const mamba2_params<float>& p, mamba2_layer_shape s, const std::vector<float>& state) {
    using ckpt_view = state_head_view<typename Policy::checkpoint_format>;
    using read_view = state_head_view<typename Policy::read_format>;
    const int32_t per_head = s.head_dim * s.state_dim;
    for (int h = 0; h < s.heads; ++h) {
      const ckpt_view ckpt = ckpt_view::in_pool(p.checkpoint, p.checkpoint_scales, h, per_head);
      const read_view read = Policy::shared_state ? read_view{}
                                                  : read_view::in_pool(p.read_copy, p.read_copy_scales, h, per_head);
      write_head_state<Policy>(serial_executor{}, state.data() + size_t(h) * per_head, s, ckpt, read);
    }
  }
};

/// Runs the whole sequence under `Policy` and returns its errors at the marks.
template <class Policy>
std::vector<interval_error> run_policy(const problem& pr, const std::vector<double>& y_ref, bool gate,
                                       const std::vector<int>& marks) {
  mamba2_params<float> p = contiguous_mamba2_params<float>(pr.shape, 1);
  p.A = pr.A.data();
  p.D = pr.D.data();
  p.dt_bias = pr.dt_bias.data();
  p.seed = 0x5EEDull;
  layer_buffers<Policy> buffers(p, pr.shape, pr.initial_state);
  std::vector<float> y(pr.x_size());
  p.y = y.data();
  error_tracker tracker(pr.shape.heads, pr.shape.head_dim, marks);
  for (int t = 0; t < pr.steps; ++t) {
    p.x = pr.x.data() + size_t(t) * pr.x_size();
    p.z = gate ? pr.z.data() + size_t(t) * pr.x_size() : nullptr;
    p.dt = pr.dt.data() + size_t(t) * pr.shape.heads;
    p.B = pr.B.data() + size_t(t) * pr.b_size();
    p.C = pr.C.data() + size_t(t) * pr.b_size();
    cpu::decode_step<Policy>(p).throw_if_error();
    tracker.add(t, y.data(), y_ref.data() + size_t(t) * pr.x_size());
  }
  return tracker.intervals();
}

/// One studied policy: its labels, memory and traffic, how to run it, and its errors.
struct study_entry {
  std::string mode, read, checkpoint, rounding, description;
  std::string window_mode;  ///< Gated DeltaNet: corrected_values, raw_inputs, or none (write-back)
  size_t checkpoint_bytes = 0, read_copy_bytes = 0, window_bytes = 0;
  double bytes_per_element_step = 0;
  std::function<void(study_entry&)> run;          ///< fills the errors
  std::vector<interval_error> errors;             ///< of the outputs, per interval between marks
  std::vector<interval_error> checkpoint_errors;  ///< of the decoded checkpoint at each mark (GDN)
  std::string failure;

  std::string label() const {
    const std::string formats = mode == "separate" ? read + "/" + checkpoint : checkpoint;
    const std::string window = window_mode == "corrected_values" ? " cv" : window_mode == "raw_inputs" ? " raw" : "";
    return mode + " " + formats + " " + rounding + window;
  }
};

/// The labels and modelled state traffic of `Policy`.
template <class Policy>
study_entry policy_entry() {
  study_entry e;
  e.mode = Policy::is_writeback ? "writeback" : (Policy::shared_state ? "shared" : "separate");
  e.read = Policy::read_format::name;
  e.checkpoint = Policy::checkpoint_format::name;
  e.rounding = Policy::rounding::is_stochastic ? "sr" : "rne";
  e.description = describe<Policy>();
  e.bytes_per_element_step = state_traffic_per_step<Policy>().total();
  return e;
}

/// A Mamba-2 entry: `pr`'s sequence under `Policy`.
template <class Policy>
study_entry make_entry(const problem& pr, const reference_run& ref, bool gate, const std::vector<int>& marks) {
  study_entry e = policy_entry<Policy>();
  const mamba2_buffer_sizes memory = mamba2_buffers<Policy>(pr.shape, 1, dtype::f32);
  e.checkpoint_bytes = memory.checkpoint_total();
  e.read_copy_bytes = memory.read_copy_total();
  e.window_bytes = memory.window_total();
  e.run = [&pr, &ref, gate, &marks](study_entry& self) {
    self.errors = run_policy<Policy>(pr, ref.outputs, gate, marks);
  };
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
std::vector<study_entry> make_entries(policy_list<Policies...>, const problem& pr, const reference_run& ref, bool gate,
                                      const std::vector<int>& marks) {
  return {make_entry<Policies>(pr, ref, gate, marks)...};
}

// ---------------------------------------------------------------------------------------
// Gated DeltaNet
// ---------------------------------------------------------------------------------------

/// The Gated DeltaNet layer's weights and the whole input sequence, drawn once and shared
/// by every run.
///
/// The log decay g = -exp(A_log) softplus(a + dt_bias) has the Mamba-2 problem's statistics:
/// exp(A_log) and softplus(dt_bias) from `draw_head_rate` (the first `slow_heads` value heads
/// slow), the raw decay projection a ~ N(0, 0.1^2). q, k, v and the raw write-strength
/// projection b (beta = sigmoid(b), around 0.5) are unit-variance Gaussian. Every input is
/// rounded to bfloat16 once, when drawn: the layer's inputs are bf16.
struct gdn_problem {
  gdn_layer_shape shape{};
  int steps = 0;
  int slow_heads = 0;
  std::vector<float> A, A_log, dt_bias, dt_target;  // [HV]; A = -exp(A_log)
  std::vector<bfloat16_t> q, k;                     // [steps][HK][K]
  std::vector<bfloat16_t> v;                        // [steps][HV][V]
  std::vector<bfloat16_t> a, b;                     // [steps][HV]
  std::vector<float> initial_state;                 // [HV][V][K]

  size_t qk_size() const { return size_t(shape.key_heads) * shape.key_dim; }
  size_t v_size() const { return size_t(shape.value_heads) * shape.value_dim; }
  size_t head_elements() const { return size_t(shape.value_dim) * shape.key_dim; }
  bool slow(int h) const { return h < slow_heads; }
};

void draw_gdn_weights(gdn_problem& pr, std::mt19937_64& rng) {
  for (int h = 0; h < pr.shape.value_heads; ++h) {
    const auto [a, dt] = draw_head_rate(pr.slow(h), rng);
    pr.A.push_back(-a);
    pr.A_log.push_back(std::log(a));
    pr.dt_target.push_back(dt);
    pr.dt_bias.push_back(std::log(std::expm1(dt)));
  }
}

/// Appends `steps` steps of random inputs to `pr`'s sequence.
void draw_gdn_inputs(gdn_problem& pr, int steps, std::mt19937_64& rng) {
  std::normal_distribution<float> unit(0.0f, 1.0f), raw_a(0.0f, 0.1f);
  auto append = [&](std::vector<bfloat16_t>& v, size_t n, std::normal_distribution<float>& dist) {
    for (size_t i = 0; i < n; ++i) v.push_back(from_float<bfloat16_t>(dist(rng)));
  };
  const size_t heads = size_t(pr.shape.value_heads);
  for (int t = 0; t < steps; ++t) {
    append(pr.q, pr.qk_size(), unit);
    append(pr.k, pr.qk_size(), unit);
    append(pr.v, pr.v_size(), unit);
    append(pr.a, heads, raw_a);
    append(pr.b, heads, unit);
  }
}

/// Float64 state of a Gated DeltaNet layer under the conventional step, written from the
/// recurrence (recurrence/gated_deltanet.hpp): q and k L2-normalized (eps inside the root)
/// and q scaled by K^-1/2; g = -exp(A_log) softplus(a + dt_bias), beta = sigmoid(b);
/// S' = exp(g) S, u = beta (v - S' k), S = S' + u k^T, o = S q.
class gdn_reference_layer {
 public:
  explicit gdn_reference_layer(const gdn_problem& pr) : pr_(pr), state_(size_t(pr.shape.state_elements())) {}

  std::vector<double>& state() { return state_; }

  /// Runs step `t` of `pr`'s sequence; writes o [HV][V] when it is not null.
  void step(int t, double* o) {
    const auto& s = pr_.shape;
    const int K = s.key_dim, V = s.value_dim, HV = s.value_heads;
    auto input = [t](const std::vector<bfloat16_t>& x, size_t per_step, size_t i) {
      return double(to_float(x[size_t(t) * per_step + i]));
    };
    const double eps = gated_deltanet::l2_norm_eps;
    std::vector<double> q(pr_.qk_size()), k(pr_.qk_size());
    for (size_t hk = 0; hk < size_t(s.key_heads); ++hk) {
      double qq = 0, kk = 0;
      for (size_t c = hk * K; c < (hk + 1) * K; ++c) {
        qq += input(pr_.q, q.size(), c) * input(pr_.q, q.size(), c);
        kk += input(pr_.k, k.size(), c) * input(pr_.k, k.size(), c);
      }
      const double q_norm = std::sqrt(qq + eps) * std::sqrt(double(K)), k_norm = std::sqrt(kk + eps);
      for (size_t c = hk * K; c < (hk + 1) * K; ++c) {
        q[c] = input(pr_.q, q.size(), c) / q_norm;
        k[c] = input(pr_.k, k.size(), c) / k_norm;
      }
    }
    for (int h = 0; h < HV; ++h) {
      const double* kh = k.data() + size_t(s.key_head(h)) * K;
      const double* qh = q.data() + size_t(s.key_head(h)) * K;
      const double x = input(pr_.a, size_t(HV), size_t(h)) + pr_.dt_bias[size_t(h)];
      const double g = -std::exp(double(pr_.A_log[size_t(h)])) * (x > 30 ? x : std::log1p(std::exp(x)));
      const double beta = 1 / (1 + std::exp(-input(pr_.b, size_t(HV), size_t(h))));
      const double decay = std::exp(g);
      for (int p = 0; p < V; ++p) {
        double* row = state_.data() + (size_t(h) * V + p) * K;
        double sk = 0;
        for (int c = 0; c < K; ++c) {
          row[c] *= decay;
          sk += row[c] * kh[c];
        }
        const double u = beta * (input(pr_.v, pr_.v_size(), size_t(h) * V + p) - sk);
        double acc = 0;
        for (int c = 0; c < K; ++c) {
          row[c] += u * kh[c];
          acc += row[c] * qh[c];
        }
        if (o != nullptr) o[size_t(h) * V + p] = acc;
      }
    }
  }

 private:
  const gdn_problem& pr_;
  std::vector<double> state_;  // [HV][V][K]
};

/// Weights, the initial state and the studied sequence, as `make_problem`: the initial state
/// is the float64 state after a prefill of `o.prefill` steps (from zero), or i.i.d.
/// N(0, init_std^2) with `--init-std`.
gdn_problem make_gdn_problem(const options& o) {
  std::mt19937_64 rng(o.seed);
  gdn_problem pr;
  pr.shape = o.gdn_shape;
  pr.slow_heads = o.slow_heads;
  draw_gdn_weights(pr, rng);
  const int prefill = o.init_std > 0.0 ? 0 : o.prefill;
  draw_gdn_inputs(pr, prefill, rng);
  gdn_reference_layer warmup(pr);
  pr.initial_state = initial_state(warmup, prefill, o.init_std, rng);
  for (auto* v : {&pr.q, &pr.k, &pr.v, &pr.a, &pr.b}) v->clear();
  draw_gdn_inputs(pr, o.steps, rng);
  pr.steps = o.steps;
  return pr;
}

/// One Gated DeltaNet layer's decode buffers for `Policy` (and its window mode) (batch 1, slot 0), in
/// host memory, for activations of type `Act`.
template <class Policy, class Act>
struct gdn_layer_buffers {
  using ckpt_view = state_head_view<typename Policy::checkpoint_format>;
  using read_view = state_head_view<typename Policy::read_format>;

  std::vector<block16> checkpoint, checkpoint_scales, read_copy, read_copy_scales;
  std::vector<block16> window_u, window_k, window_g, window_v, window_beta;
  std::vector<replay_cursor> cursors;

  gdn_layer_buffers(const gdn_layer_buffers&) = delete;  // `p` points into these buffers
  gdn_layer_buffers& operator=(const gdn_layer_buffers&) = delete;

  /// Allocates the buffers, binds them to `p` (shape set) and loads `state` ([HV][V][K])
  /// into them.
  gdn_layer_buffers(gdn_params<Act>& p, gdn_layer_shape s, const std::vector<float>& state) {
    const gdn_buffer_sizes sizes = gdn_buffers<Policy>(s, 1, activation_traits<Act>::tag);
    p.num_slots = 1;
    p.checkpoint = plane(checkpoint, sizes.checkpoint);
    p.checkpoint_scales = plane(checkpoint_scales, sizes.checkpoint_scales);
    p.read_copy = plane(read_copy, sizes.read_copy);
    p.read_copy_scales = plane(read_copy_scales, sizes.read_copy_scales);
    p.window_u = static_cast<float*>(plane(window_u, sizes.window_u));
    p.window_k = static_cast<float*>(plane(window_k, sizes.window_k));
    p.window_g = static_cast<float*>(plane(window_g, sizes.window_g));
    p.window_v = static_cast<Act*>(plane(window_v, sizes.window_v));
    p.window_beta = static_cast<float*>(plane(window_beta, sizes.window_beta));
    cursors.assign(size_t(s.value_heads), replay_cursor{});
    p.cursors = cursors.data();
    const size_t per_head = size_t(s.value_dim) * s.key_dim;
    for (int h = 0; h < s.value_heads; ++h) {
      const read_view read = Policy::shared_state ? read_view{} : read_copy_of(p, h);
      write_head_state<Policy>(serial_executor{}, state.data() + h * per_head, s, checkpoint_of(p, h), read);
    }
  }

  /// The decoded checkpoint, [HV][V][K].
  static std::vector<float> checkpoint_values(const gdn_params<Act>& p) {
    const size_t per_head = size_t(p.value_dim) * p.key_dim;
    std::vector<float> values(per_head * size_t(p.heads));
    for (int h = 0; h < p.heads; ++h)
      read_head_state(serial_executor{}, checkpoint_of(p, h), p.shape(), values.data() + h * per_head);
    return values;
  }

 private:
  static int64_t elements(const gdn_params<Act>& p) { return int64_t(p.value_dim) * p.key_dim; }
  static ckpt_view checkpoint_of(const gdn_params<Act>& p, int h) {
    return ckpt_view::in_pool(p.checkpoint, p.checkpoint_scales, h, elements(p));
  }
  static read_view read_copy_of(const gdn_params<Act>& p, int h) {
    return read_view::in_pool(p.read_copy, p.read_copy_scales, h, elements(p));
  }
};

/// The tokens a Gated DeltaNet checkpoint under `Policy` holds after `t` decode steps from an
/// empty window in phase 0: the tokens before its window's entries, as the steps' plans leave
/// them (a replay flush leaves its own token in the window: `gdn_flush_folds_token`).
template <class Policy>
int gdn_checkpoint_tokens(int t) {
  replay_cursor cursor{};
  for (int step = 0; step < t; ++step) {
    const cursor_probe<Policy, gdn_flush_folds_token<Policy>> probe{&cursor, 0, Policy::window};
    cursor = next_cursor(plan_step<step_kind::decode>(probe, 1), step_kind::decode);
  }
  return t - cursor.length;
}

/// Runs the whole sequence under `Policy` (and its window mode) with activations of type `Act` (the
/// bf16 inputs widened to f32, or as they are), and fills `e`'s output errors at the marks
/// and checkpoint errors at the marks.
template <class Policy, class Act>
void run_gdn_policy(study_entry& e, const gdn_problem& pr, const reference_run& ref, const std::vector<int>& marks) {
  const auto& s = pr.shape;
  gdn_params<Act> p = contiguous_gdn_params<Act>(s, 1);
  p.A_log = pr.A_log.data();
  p.dt_bias = pr.dt_bias.data();
  p.seed = 0x5EEDull;
  gdn_layer_buffers<Policy, Act> buffers(p, s, pr.initial_state);
  std::vector<Act> q(pr.qk_size()), k(pr.qk_size()), v(pr.v_size()), a(size_t(s.value_heads)),
      b(size_t(s.value_heads)), o(pr.v_size());
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.a = a.data();
  p.b = b.data();
  p.o = o.data();
  std::vector<float> y(pr.v_size());
  error_tracker tracker(s.value_heads, s.value_dim, marks);
  for (int t = 0; t < pr.steps; ++t) {
    auto load = [t](std::vector<Act>& to, const std::vector<bfloat16_t>& from) {
      for (size_t i = 0; i < to.size(); ++i) to[i] = from_float<Act>(to_float(from[size_t(t) * to.size() + i]));
    };
    load(q, pr.q);
    load(k, pr.k);
    load(v, pr.v);
    load(a, pr.a);
    load(b, pr.b);
    cpu::decode_step<Policy>(p).throw_if_error();
    for (size_t i = 0; i < y.size(); ++i) y[i] = to_float(o[i]);
    tracker.add(t, y.data(), ref.outputs.data() + size_t(t) * pr.v_size());
    const size_t mark = e.checkpoint_errors.size();
    if (t + 1 == marks[mark]) {
      // The checkpoint holds the tokens before its window's (`gdn_checkpoint_tokens`).
      const std::vector<float> ckpt = buffers.checkpoint_values(p);
      const std::vector<double>& held = ref.states.at(gdn_checkpoint_tokens<Policy>(t + 1));
      e.checkpoint_errors.push_back(
          interval_error::of(t + 1, head_errors(ckpt.data(), held.data(), s.value_heads, pr.head_elements())));
    }
  }
  e.errors = tracker.intervals();
}

/// A Gated DeltaNet entry: `pr`'s sequence under `Policy` (and its window mode). Memory with bf16
/// activations (the layer's), which only the raw_inputs window's v depends on.
template <class Policy>
study_entry make_gdn_entry(const gdn_problem& pr, const reference_run& ref, const std::vector<int>& marks,
                           bool bf16_act) {
  study_entry e = policy_entry<Policy>();
  e.window_mode = Policy::is_writeback ? "none" : keeps_raw_inputs<Policy> ? "raw_inputs" : "corrected_values";
  if (!Policy::is_writeback) e.description += " window=" + e.window_mode;
  e.bytes_per_element_step = state_traffic_per_step<Policy, gdn_flush_period<Policy>>().total();
  const gdn_buffer_sizes memory = gdn_buffers<Policy>(pr.shape, 1, dtype::bf16);
  e.checkpoint_bytes = memory.checkpoint_total();
  e.read_copy_bytes = memory.read_copy_total();
  e.window_bytes = memory.window_total();
  if (bf16_act)
    e.run = [&pr, &ref, &marks](study_entry& self) { run_gdn_policy<Policy, bfloat16_t>(self, pr, ref, marks); };
  else
    e.run = [&pr, &ref, &marks](study_entry& self) { run_gdn_policy<Policy, float>(self, pr, ref, marks); };
  return e;
}

/// A write-back policy's entry (it has no window), or a replay policy's in both window modes.
template <class Policy>
void add_gdn_entries(std::vector<study_entry>& entries, const gdn_problem& pr, const reference_run& ref,
                     const std::vector<int>& marks, bool bf16_act) {
  entries.push_back(make_gdn_entry<gdn_policy<Policy, gdn_window::corrected_values>>(pr, ref, marks, bf16_act));
  if constexpr (!Policy::is_writeback)
    entries.push_back(make_gdn_entry<gdn_policy<Policy, gdn_window::raw_inputs>>(pr, ref, marks, bf16_act));
}

template <class... Policies>
std::vector<study_entry> make_gdn_entries(policy_list<Policies...>, const gdn_problem& pr, const reference_run& ref,
                                          const std::vector<int>& marks, bool bf16_act) {
  std::vector<study_entry> entries;
  (add_gdn_entries<Policies>(entries, pr, ref, marks, bf16_act), ...);
  return entries;
}

// The Gated DeltaNet modes: the conventional write-back, shared replay, and split read and
// checkpoint precisions, stochastic rounding where the checkpoint is narrow. (With an fp32
// checkpoint the two roundings give identical results, as in the Mamba-2 study.)
using gdn_studied_policies = policy_list<
    writeback_policy<fp32_format, rne>,
    writeback_policy<fp16_format, rne>,
    writeback_policy<fp16_format, sr>,
    writeback_policy<bf16_format, rne>,
    writeback_policy<bf16_format, sr>,
    shared_mode<fp32_format, rne>,
    shared_mode<fp16_format, rne>,
    shared_mode<fp16_format, sr>,
    shared_mode<bf16_format, rne>,
    shared_mode<bf16_format, sr>,
    shared_mode<nvfp4_format, rne>,
    shared_mode<nvfp4_format, sr>,
    separate_mode<fp16_format, fp32_format, rne>,
    separate_mode<bf16_format, fp32_format, rne>,
    separate_mode<fp8_e4m3_format, fp32_format, rne>,
    separate_mode<nvfp4_format, fp32_format, rne>,
    separate_mode<bf16_format, fp16_format, rne>,
    separate_mode<bf16_format, fp16_format, sr>,
    separate_mode<fp8_e4m3_format, fp16_format, rne>,
    separate_mode<nvfp4_format, fp16_format, rne>,
    separate_mode<nvfp4_format, fp16_format, sr>,
    separate_mode<fp16_format, bf16_format, rne>,
    separate_mode<fp16_format, bf16_format, sr>,
    separate_mode<nvfp4_format, bf16_format, rne>,
    separate_mode<nvfp4_format, bf16_format, sr>>;

// ---------------------------------------------------------------------------------------
// Running and reporting, for either model
// ---------------------------------------------------------------------------------------

/// Runs every entry, `threads` at a time (each entry owns its buffers; the inputs and the
/// reference are shared read-only).
void run_all(std::vector<study_entry>& entries, int threads) {
  std::atomic<size_t> next{0};
  auto worker = [&]() {
    for (size_t i = next++; i < entries.size(); i = next++) {
      try {
        entries[i].run(entries[i]);
      } catch (const std::exception& ex) {
        entries[i].failure = ex.what();
      }
    }
  };
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  for (const auto& e : entries)
    if (!e.failure.empty()) throw std::runtime_error(e.description + ": " + e.failure);
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

/// What the per-head state table shows of a problem's heads.
struct head_summary {
  int heads, steps;
  size_t per_head;                      ///< state elements per head
  const std::vector<float>& A;          ///< [H] decay rates (negative)
  const std::vector<float>& dt_target;  ///< [H]
  int slow_heads;
};

/// Per-head state statistics of `state` ([H][per_head]): RMS, mean block amax over blocks of
/// 16, the share of blocks whose NVFP4 (UE4M3) scale is subnormal (amax < 6 * 2^-6) or at
/// its floor (amax <= 6 * 2^-9), and the NVFP4 storage error as is and with a 2^6 prescale.
void print_state_table(const head_summary& hs, const std::vector<double>& initial,
                       const std::vector<double>& final_state) {
  const size_t per_head = hs.per_head;
  std::printf("\nstate magnitudes per head (initial state, and float64 reference state at step %d)\n", hs.steps);
  std::printf("%-5s %-5s %8s %9s %10s %10s %10s %11s %12s %11s %10s %12s\n", "head", "kind", "A", "dt", "tau steps",
              "rms init", "rms final", "block amax", "subnormal %", "at floor %", "nvfp4 err", "x2^6 nvfp4");
  for (int h = 0; h < hs.heads; ++h) {
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
    const double tau = 1.0 / (double(hs.dt_target[size_t(h)]) * -hs.A[size_t(h)]);
    std::printf("%-5d %-5s %8.3f %9.2e %10.1f %10.3e %10.3e %11.3e %12.1f %11.1f %10.3e %12.3e\n", h,
                h < hs.slow_heads ? "slow" : "fast", hs.A[size_t(h)], hs.dt_target[size_t(h)], tau,
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

/// Width of the label column: 28, or the longest label.
int label_width(const std::vector<study_entry>& entries) {
  size_t width = 28;
  for (const auto& e : entries) width = std::max(width, e.label().size());
  return int(width);
}

void print_policy_table(const std::vector<study_entry>& entries, const char* activations) {
  const int w = label_width(entries);
  std::printf("\nmodes (memory per request per layer in bytes, %s activations; modelled state bytes per\n"
              "element per step)\n",
              activations);
  std::printf("%-3s %-*s %-64s %9s %9s %8s %8s\n", "#", w, "label", "describe()", "ckpt B", "read B", "window B",
              "B/el/st");
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    std::printf("%-3zu %-*s %-64s %9zu %9zu %8zu %8.4f\n", i, w, e.label().c_str(), e.description.c_str(),
                e.checkpoint_bytes, e.read_copy_bytes, e.window_bytes, e.bytes_per_element_step);
  }
}

/// One row per entry of `errors` at every mark, and the worst head at the last.
void print_error_table(const std::vector<study_entry>& entries, const std::vector<int>& marks, const char* title,
                       std::vector<interval_error> study_entry::*errors) {
  const int w = label_width(entries);
  std::printf("\n%s\n", title);
  std::printf("%-3s %-*s", "#", w, "label");
  for (int m : marks) std::printf(" %9d", m);
  std::printf(" %11s\n", "worst head");
  for (size_t i = 0; i < entries.size(); ++i) {
    const auto& e = entries[i];
    std::printf("%-3zu %-*s", i, w, e.label().c_str());
    for (const auto& iv : e.*errors) std::printf(" %9.2e", iv.mean);
    std::printf(" %11.2e\n", (e.*errors).back().worst);
  }
}

/// One row per entry of `errors` per head at the last mark.
void print_head_table(const std::vector<study_entry>& entries, int heads, int slow_heads, const char* title,
                      std::vector<interval_error> study_entry::*errors) {
  const int w = label_width(entries);
  std::printf("\n%s (s: slow head, f: fast head)\n", title);
  std::printf("%-3s %-*s", "#", w, "label");
  for (int h = 0; h < heads; ++h) std::printf(" %8d%c", h, h < slow_heads ? 's' : 'f');
  std::printf("\n");
  for (size_t i = 0; i < entries.size(); ++i) {
    std::printf("%-3zu %-*s", i, w, entries[i].label().c_str());
    for (double v : (entries[i].*errors).back().per_head) std::printf(" %9.2e", v);
    std::printf("\n");
  }
}

/// The CSV of the Mamba-2 study, or with `gdn` the Gated DeltaNet one (window mode and
/// checkpoint error columns).
void write_csv(const std::string& path, const std::vector<study_entry>& entries, bool gdn) {
  std::ofstream f(path);
  f << (gdn ? "mode,read,checkpoint,rounding,window_mode,step,mean_rel_err,worst_head_rel_err,mean_ckpt_rel_err,"
              "worst_head_ckpt_rel_err\n"
            : "mode,read,checkpoint,rounding,step,mean_rel_err,worst_head_rel_err\n");
  char line[256];
  for (const auto& e : entries) {
    for (size_t m = 0; m < e.errors.size(); ++m) {
      const auto& iv = e.errors[m];
      if (gdn)
        std::snprintf(line, sizeof line, "%s,%s,%s,%s,%s,%d,%.6e,%.6e,%.6e,%.6e\n", e.mode.c_str(), e.read.c_str(),
                      e.checkpoint.c_str(), e.rounding.c_str(), e.window_mode.c_str(), iv.step, iv.mean, iv.worst,
                      e.checkpoint_errors[m].mean, e.checkpoint_errors[m].worst);
      else
        std::snprintf(line, sizeof line, "%s,%s,%s,%s,%d,%.6e,%.6e\n", e.mode.c_str(), e.read.c_str(),
                      e.checkpoint.c_str(), e.rounding.c_str(), iv.step, iv.mean, iv.worst);
      f << line;
    }
  }
  if (!f) throw std::runtime_error("cannot write " + path);
}

/// The fp32 modes must agree with the float64 reference to float rounding; more is a defect
/// of the library or of the reference. `outputs`: check the outputs (not when they are
/// bf16); the checkpoints are checked where they were measured.
bool fp32_modes_agree(const std::vector<study_entry>& entries, bool outputs = true) {
  double worst = 0, worst_checkpoint = 0;
  bool checkpoints = false;
  for (const auto& e : entries) {
    if (e.read != "fp32" || e.checkpoint != "fp32") continue;
    for (const auto& iv : e.errors) worst = std::max(worst, iv.worst);
    for (const auto& iv : e.checkpoint_errors) worst_checkpoint = std::max(worst_checkpoint, iv.worst);
    checkpoints = checkpoints || !e.checkpoint_errors.empty();
  }
  if (!checkpoints) {
    std::printf("fp32 modes against the float64 reference: worst head %.2e (limit 1e-4)\n", worst);
    return worst <= 1e-4;
  }
  std::printf("fp32 modes against the float64 reference: worst head %.2e output%s, %.2e checkpoint (limit 1e-4)\n",
              worst, outputs ? "" : " (bf16, not checked)", worst_checkpoint);
  return (!outputs || worst <= 1e-4) && worst_checkpoint <= 1e-4;
}

/// The closing line: where the CSV went and how long the study took.
void print_done(const options& o, size_t modes, size_t marks, std::chrono::steady_clock::time_point start,
                int threads) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("\nwrote %s (%zu modes x %zu marks); %.1f s on %d threads\n", o.csv.c_str(), modes, marks, seconds,
              threads);
}

int run_mamba2(const options& o, int threads, std::chrono::steady_clock::time_point start) {
  const auto& s = o.shape;
  std::printf("layer: 1 Mamba-2 layer, %d heads (%d slow) x %d x %d, %d group, batch 1, %d steps, W=%d, cpu\n",
              s.heads, o.slow_heads, s.head_dim, s.state_dim, s.groups, o.steps, window);
  std::printf("inputs: f32; D=%g (%s), gate %s; initial state: %s\n", double(o.D),
              o.D == 0.0f ? "the error is the state term's alone" : "skip term included",
              o.gate ? "on" : "off",
              o.init_std > 0.0 ? ("i.i.d. N(0, " + std::to_string(o.init_std) + "^2)").c_str()
                               : ("float64 prefill of " + std::to_string(o.prefill) + " steps").c_str());

  const problem pr = make_problem(o);
  const std::vector<int> marks = marks_for(o.steps);
  reference_layer reference(pr, o.gate);
  const reference_run ref = run_reference(reference, pr.initial_state, pr.steps, pr.x_size(), {pr.steps});
  const std::vector<double> initial(pr.initial_state.begin(), pr.initial_state.end());
  print_state_table({s.heads, pr.steps, size_t(s.head_dim) * s.state_dim, pr.A, pr.dt_target, pr.slow_heads},
                    initial, ref.states.at(pr.steps));
  print_nvfp4_range_table();

  std::vector<study_entry> entries = make_entries(studied_policies{}, pr, ref, o.gate, marks);
  run_all(entries, threads);

  print_policy_table(entries, "f32");
  print_error_table(entries, marks, "mean over heads of the output relative error, per interval ending at step",
                    &study_entry::errors);
  print_head_table(entries, s.heads, pr.slow_heads, "output relative error per head over the last interval",
                   &study_entry::errors);
  write_csv(o.csv, entries, false);
  print_done(o, entries.size(), marks.size(), start, threads);
  return fp32_modes_agree(entries) ? 0 : 1;
}

int run_gdn(const options& o, int threads, std::chrono::steady_clock::time_point start) {
  const auto& s = o.gdn_shape;
  std::printf("layer: 1 Gated DeltaNet layer, %d value heads (%d slow) x V=%d, %d key heads x K=%d, batch 1, "
              "%d steps, W=%d, cpu\n",
              s.value_heads, o.slow_heads, s.value_dim, s.key_heads, s.key_dim, o.steps, window);
  std::printf("inputs: bf16, passed to the step as %s; initial state: %s\n",
              o.bf16_act ? "bf16 (the output is bf16 too)" : "f32 (exact; the output stays f32)",
              o.init_std > 0.0 ? ("i.i.d. N(0, " + std::to_string(o.init_std) + "^2)").c_str()
                               : ("float64 prefill of " + std::to_string(o.prefill) + " steps").c_str());

  const gdn_problem pr = make_gdn_problem(o);
  const std::vector<int> marks = marks_for(o.steps);
  gdn_reference_layer reference(pr);
  // The reference states the checkpoints hold at the marks: a write-back step's the mark's
  // own, a replay flush's (window W, like every studied replay mode) the tokens before its window.
  std::set<int> held(marks.begin(), marks.end());
  for (int m : marks) held.insert(gdn_checkpoint_tokens<replay_policy<window, fp32_format>>(m));
  held.insert(pr.steps);
  const reference_run ref = run_reference(reference, pr.initial_state, pr.steps, pr.v_size(), held);
  const std::vector<double> initial(pr.initial_state.begin(), pr.initial_state.end());
  print_state_table({s.value_heads, pr.steps, pr.head_elements(), pr.A, pr.dt_target, pr.slow_heads}, initial,
                    ref.states.at(pr.steps));

  std::vector<study_entry> entries = make_gdn_entries(gdn_studied_policies{}, pr, ref, marks, o.bf16_act);
  run_all(entries, threads);

  print_policy_table(entries, "bf16");
  std::printf("\n(cv: window mode corrected_values, raw: raw_inputs)\n");
  print_error_table(entries, marks, "mean over heads of the output relative error, per interval ending at step",
                    &study_entry::errors);
  print_error_table(entries, marks, "mean over heads of the checkpoint relative error at step",
                    &study_entry::checkpoint_errors);
  print_head_table(entries, s.value_heads, pr.slow_heads, "output relative error per head over the last interval",
                   &study_entry::errors);
  print_head_table(entries, s.value_heads, pr.slow_heads, "checkpoint relative error per head at the last step",
                   &study_entry::checkpoint_errors);
  write_csv(o.csv, entries, true);
  print_done(o, entries.size(), marks.size(), start, threads);
  return fp32_modes_agree(entries, !o.bf16_act) ? 0 : 1;
}

int run(const options& o) {
  const auto start = std::chrono::steady_clock::now();
  const int threads = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
  return o.gdn() ? run_gdn(o, threads, start) : run_mamba2(o, threads, start);
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  if (const int code = parse(argc, argv, o); code != args::proceed) return code;
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
