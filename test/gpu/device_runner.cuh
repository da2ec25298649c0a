// SPDX-License-Identifier: Apache-2.0
// Runs a step on the device over a host harness's buffers, for any recurrence: uploads inputs
// and state, launches, downloads what the step may write, and turns device error flags into
// a status. Each recurrence's device_runner.cuh (mamba2/, gated_deltanet/) specializes
// device_recurrence for its params. Also the device runners and checks the recurrences'
// GPU tests share.
#pragma once

#include <cuda_runtime.h>

#include "../support/catch.hpp"

#include <replayssm/cuda.cuh>

#include <algorithm>
#include <cstring>
#include <list>
#include <random>
#include <vector>

#include "../support/spec_round.hpp"

namespace replayssm_test {

#define REPLAYSSM_CUDA_CHECK(call) REQUIRE((call) == cudaSuccess)

/// A device allocation mirroring a host range.
class device_copy {
 public:
  device_copy(const void* host, size_t bytes) : host_(host), bytes_(bytes) {
    if (host == nullptr || bytes == 0) return;
    REPLAYSSM_CUDA_CHECK(cudaMalloc(&device_, bytes));
    REPLAYSSM_CUDA_CHECK(cudaMemcpy(device_, host, bytes, cudaMemcpyHostToDevice));
  }
  device_copy(const device_copy&) = delete;
  device_copy& operator=(const device_copy&) = delete;
  ~device_copy() { cudaFree(device_); }
  template <class T>
  T* get() const {
    return static_cast<T*>(device_);
  }
  /// Copies the device contents back over the host range.
  void download() const {
    if (device_ != nullptr)
      REPLAYSSM_CUDA_CHECK(cudaMemcpy(const_cast<void*>(host_), device_, bytes_, cudaMemcpyDeviceToHost));
  }

 private:
  const void* host_;
  size_t bytes_;
  void* device_ = nullptr;
};

/// The device copies of a step's host buffers: `upload` copies a range to the device,
/// `mirror` also copies it back on `download`; both return the device pointer.
class device_mirror {
 public:
  template <class T>
  T* upload(T* host, size_t bytes) {
    return copies_.emplace_back(host, bytes).template get<T>();
  }
  template <class T>
  T* mirror(T* host, size_t bytes) {
    T* device = upload(host, bytes);
    written_.push_back(&copies_.back());
    return device;
  }
  void download() const {
    for (const device_copy* copy : written_) copy->download();
  }

 private:
  std::list<device_copy> copies_;  // a device_copy neither copies nor moves
  std::vector<const device_copy*> written_;
};

/// A recurrence's device side, specialized for its params: `mirror(m, p, st)` points the
/// activations, weights and window buffers of `p` over the host state `st` at device
/// copies; `decode<Policy, Threads>(p)` launches its decode step.
template <class Params>
struct device_recurrence;

/// Runs `launch(p)` with device copies of every buffer the host params `hp` over `st` name,
/// then downloads what a step may write (outputs, state, window, cursors, slot tables) and
/// turns the device error flags into a status.
template <class State, class Launch>
status device_run(const typename State::params& hp, State& st, Launch&& launch) {
  const size_t batch = size_t(hp.batch), rows = batch * size_t(hp.tokens), i32 = sizeof(int32_t);
  device_mirror m;
  typename State::params p = hp;
  device_recurrence<typename State::params>::mirror(m, p, st);
  p.slot_indices = m.mirror(hp.slot_indices, batch * i32);
  p.flush_phase = m.upload(hp.flush_phase, st.phase.size() * i32);
  p.token_counts = m.upload(hp.token_counts, batch * i32);
  p.accepted_counts = m.upload(hp.accepted_counts, batch * i32);
  p.snapshot_slots = m.mirror(hp.snapshot_slots, rows * i32);
  p.checkpoint = m.mirror(hp.checkpoint, st.sizes.checkpoint);
  p.checkpoint_scales = m.mirror(hp.checkpoint_scales, st.sizes.checkpoint_scales);
  p.read_copy = m.mirror(hp.read_copy, st.sizes.read_copy);
  p.read_copy_scales = m.mirror(hp.read_copy_scales, st.sizes.read_copy_scales);
  p.cursors = m.mirror(hp.cursors, st.sizes.cursors);
  const step_report no_errors{};
  device_copy report(&no_errors, sizeof no_errors);
  p.report = report.get<step_report>();
  const std::vector<request_plan> no_plans(batch + 1, request_plan::skip);
  device_copy plans(no_plans.data(), no_plans.size() * sizeof(request_plan));
  p.request_plans = plans.get<request_plan>();
  status launched = launch(p);
  if (!launched) return launched;
  REPLAYSSM_CUDA_CHECK(cudaDeviceSynchronize());
  m.download();
  return replayssm::cuda::take_step_errors(p.report);
}

/// The device decode runner of a host state's policy, in blocks of `Threads` threads.
template <class State, int Threads = replayssm::cuda::decode_block_threads>
step_runner<State> device_decode() {
  using params = typename State::params;
  return [](const params& hp, State& st) {
    return device_run(hp, st, [](const params& p) {
      return device_recurrence<params>::template decode<typename State::policy, Threads>(p);
    });
  };
}

/// The device runners of a speculative scenario.
template <class R, class Policy, class Act>
spec_runners<R, Policy, Act> device_spec_runners() {
  using format = typename Policy::checkpoint_format;
  using params = typename spec_runners<R, Policy, Act>::replay_state::params;
  return {[](const params& hp, auto& st) {
            return device_run(hp, st, [](const params& p) { return replayssm::cuda::verify_step<Policy>(p); });
          },
          [](const params& hp, auto& st) {
            return device_run(hp, st, [](const params& p) { return replayssm::cuda::commit_drafts(p); });
          },
          [](const params& hp, auto& st) {
            return device_run(
                hp, st, [](const params& p) { return replayssm::cuda::verify_step<writeback_policy<format>>(p); });
          },
          [](const params& hp, auto& st) {
            return device_run(hp, st, [](const params& p) {
              return replayssm::cuda::snapshot_commit(p, const_cast<int32_t*>(p.slot_indices),
                                                      const_cast<int32_t*>(p.snapshot_slots));
            });
          }};
}

/// run_spec_scenario on the device, by default within the activation's output tolerance and
/// fp32 accuracy of the state.
template <class R, class Policy, class Act>
spec_result gpu_spec(const typename R::case_type& c, int tokens, int rounds,
                     tolerances tol = {output_tolerance<Act>(), 1e-5}) {
  return run_spec_scenario(c, tokens, rounds, tol, device_spec_runners<R, Policy, Act>());
}

/// Requires the GPU's `n` outputs at `gpu` within the activation's tolerance of the CPU's at
/// `cpu`, relative to the largest (at least 1): the GPU sums in its own order.
template <class Act>
void require_outputs_agree(const Act* cpu, const Act* gpu, size_t n) {
  double scale = 0.0, worst = 0.0;
  for (size_t i = 0; i < n; ++i) {
    scale = std::max(scale, std::abs(widen(cpu[i])));
    worst = std::max(worst, std::abs(widen(cpu[i]) - widen(gpu[i])));
  }
  REQUIRE(worst <= output_tolerance<Act>() * std::max(scale, 1.0));
}

/// A CPU and a GPU copy of `slots` slots under `Policy`, the case's first `c.num_slots` drawn
/// at random and the same in both, and the case's inputs (for up to `tokens` per request).
template <class R, class Policy, class Act>
struct twin_states {
  std::mt19937_64 rng;
  typename R::template inputs<Act> in;
  typename R::template state<Policy, Act> cpu, gpu;
  twin_states(const typename R::case_type& c, int tokens, int slots, int drafts)
      : rng(c.seed), in(c, rng, tokens), cpu(c.shape, slots, drafts), gpu(c.shape, slots, drafts) {
    for (int slot = 0; slot < c.num_slots; ++slot) {
      const auto init = R::random_state(c.shape, rng);
      cpu.set_state(slot, init);
      gpu.set_state(slot, init);
    }
  }
};

/// Requires every stepped request's drafts' outputs (rows of `tokens` * `ys` per request)
/// on the GPU within the activation's tolerance of the CPU's.
template <class Act>
void require_round_outputs_agree(const std::vector<Act>& cpu, const std::vector<Act>& gpu, const round_plan& plan,
                                 int tokens, size_t ys) {
  for (size_t b = 0; b < plan.drafts.size(); ++b)
    require_outputs_agree(cpu.data() + b * tokens * ys, gpu.data() + b * tokens * ys, size_t(plan.drafts[b]) * ys);
}

/// Rounds of verify + commit on the CPU and on the GPU from the same state and inputs:
/// checkpoints and cursors must be the same bytes, outputs agree within the activation's
/// tolerance (the warp steps sum in their own order).
template <class R, class Policy, class Act>
void require_spec_bit_identical(const typename R::case_type& c, int tokens, int rounds) {
  twin_states<R, Policy, Act> twins(c, tokens, c.num_slots, tokens);
  auto& rng = twins.rng;
  auto& in = twins.in;
  auto &cpu_state = twins.cpu, &gpu_state = twins.gpu;
  const std::vector<int32_t> slots = request_slots(c);
  const size_t ys = R::outputs(c.shape);
  std::vector<Act> y_cpu(size_t(c.batch) * tokens * ys), y_gpu(y_cpu.size());
  const auto runners = device_spec_runners<R, Policy, Act>();
  for (int round = 0; round < rounds; ++round) {
    in.draw(rng);
    const round_plan plan(c.batch, tokens, round, rng);
    typename R::template state<Policy, Act>::params p;
    in.bind(p, c);
    plan.apply(p);
    p.seed = c.seed;
    p.slot_indices = slots.data();
    cpu_state.bind(p, false);
    R::output(p) = y_cpu.data();
    REQUIRE(cpu::verify_step<Policy>(p).ok());
    REQUIRE(cpu::commit_drafts(p).ok());
    gpu_state.bind(p, false);
    R::output(p) = y_gpu.data();
    REQUIRE(runners.verify(p, gpu_state).ok());
    REQUIRE(runners.commit(p, gpu_state).ok());
    INFO("round " << round);
    require_round_outputs_agree(y_cpu, y_gpu, plan, tokens, ys);
    REQUIRE(cpu_state.checkpoint_values(1) == gpu_state.checkpoint_values(1));
    REQUIRE(std::memcmp(cpu_state.cursors.data(), gpu_state.cursors.data(),
                        cpu_state.cursors.size() * sizeof(replay_cursor)) == 0);
  }
}

/// A verify step on the device reports a request whose draft count is outside [1, tokens] (0,
/// then more than the step's rows hold) and steps no head of it: its cursors and checkpoint
/// stay as they were while the other request steps; a commit of more drafts than were
/// verified is reported and moves no cursor. `c`: two requests on three slots.
template <class R, class Policy>
void require_device_rejects_bad_counts(const typename R::case_type& c) {
  using state = typename R::template state<Policy, float>;
  std::mt19937_64 rng(c.seed);
  typename R::template inputs<float> in(c, rng, 4);
  in.draw(rng);
  state st(c.shape, c.num_slots, 4);
  for (int s = 0; s < c.num_slots; ++s) st.set_state(s, R::random_state(c.shape, rng));
  const size_t stepped = 2 * st.cursors.size() / size_t(c.num_slots);  // slot 2's first head
  std::vector<float> out(size_t(c.batch) * 4 * R::outputs(c.shape));
  std::vector<int32_t> slots{2, 0}, drafts{4, 0}, accepted{2, 0};
  typename state::params p;
  in.bind(p, c);  // two requests of up to 4 drafts
  st.bind(p, false);
  p.token_counts = drafts.data();
  p.accepted_counts = accepted.data();
  p.slot_indices = slots.data();
  R::output(p) = out.data();
  const auto rejected_state = st.checkpoint_values(0);
  const auto runners = device_spec_runners<R, Policy, float>();
  status s = runners.verify(p, st);
  CHECK_THAT(s.message(), contains_text("request 1: a request's token count was outside"));
  CHECK(st.cursors[0].pending == 0);        // request 1 (slot 0) was not stepped at any head
  CHECK(st.cursors[stepped].pending == 4);  // request 0 was
  accepted = {5, 0};
  const auto cursors = st.cursors;
  s = runners.commit(p, st);
  CHECK_THAT(s.message(), contains_text("commit accepted more drafts than were verified"));
  CHECK(st.cursors[stepped].length == cursors[stepped].length);
  drafts = {1, 5};  // request 1: more drafts than the step's rows hold (tokens = 4)
  s = runners.verify(p, st);
  CHECK_THAT(s.message(), contains_text("request 1: a request's token count was outside"));
  CHECK(st.cursors[0].pending == 0);        // request 1 was not stepped
  CHECK(st.cursors[stepped].pending == 1);  // request 0 was, with its one draft
  CHECK(st.checkpoint_values(0) == rejected_state);
}

/// Runs `steps` decode steps of Policy on the CPU and on the GPU (blocks of `Threads` where
/// the block kernels run) from the same state and inputs and requires identical bytes of a
/// request's checkpoint (the flush's arithmetic is one definition), and outputs that agree
/// within the activation's tolerance (the GPU sums in its own order).
template <class R, class Policy, class Act, int Threads = replayssm::cuda::decode_block_threads>
void require_bit_identical(const typename R::case_type& c, int steps) {
  using state = typename R::template state<Policy, Act>;
  std::mt19937_64 rng(c.seed);
  typename R::template inputs<Act> in(c, rng);
  state cpu_state(c.shape, c.num_slots), gpu_state(c.shape, c.num_slots);
  for (int slot = 0; slot < c.num_slots; ++slot) {
    const auto init = R::random_state(c.shape, rng);
    cpu_state.set_state(slot, init);
    gpu_state.set_state(slot, init);
    cpu_state.phase[size_t(slot)] = gpu_state.phase[size_t(slot)] = slot % Policy::window;
  }
  const std::vector<int32_t> slots = request_slots(c);
  std::vector<Act> out_cpu(size_t(c.batch) * R::outputs(c.shape)), out_gpu(out_cpu.size());
  const step_runner<state> gpu_decode = device_decode<state, Threads>();
  for (int t = 0; t < steps; ++t) {
    in.draw(rng);
    typename state::params p;
    in.bind(p, c);
    p.slot_indices = slots.data();
    p.seed = c.seed;
    cpu_state.bind(p, true);
    R::output(p) = out_cpu.data();
    REQUIRE(R::template cpu_decode<Policy>(p).ok());
    gpu_state.bind(p, true);
    R::output(p) = out_gpu.data();
    REQUIRE(gpu_decode(p, gpu_state).ok());
    INFO("step " << t);
    require_outputs_agree(out_cpu.data(), out_gpu.data(), out_cpu.size());
    REQUIRE(cpu_state.checkpoint_values(slots[0]) == gpu_state.checkpoint_values(slots[0]));
  }
}

/// A decode step on the device reports a slot outside the pool (with the request's index) and
/// a cursor no step could have left, and skips their request and head: their outputs and
/// state stay as they were.
/// With `whole_requests`, the step must also leave every head of a request with a bad
/// cursor unstepped and reject two requests on one slot (the planned steps).
template <class R, class Policy>
void require_device_skips_bad_rows(const typename R::case_type& c, bool whole_requests = false) {
  using state = typename R::template state<Policy, float>;
  std::mt19937_64 rng(c.seed);
  typename R::template inputs<float> in(c, rng);
  in.draw(rng);
  state st(c.shape, c.num_slots);
  for (int s = 0; s < c.num_slots; ++s) st.set_state(s, R::random_state(c.shape, rng));
  std::vector<float> out(size_t(c.batch) * R::outputs(c.shape), 7.0f);
  std::vector<int32_t> slots{5, -1};
  typename state::params p;
  in.bind(p, c);
  st.bind(p, false);
  R::output(p) = out.data();
  p.slot_indices = slots.data();
  const auto before = st.checkpoint_values(0);
  const step_runner<state> decode = device_decode<state>();
  status s = decode(p, st);
  CHECK_THAT(s.message(), contains_text("slot index was outside"));
  CHECK(std::all_of(out.begin(), out.end(), [](float v) { return v == 7.0f; }));
  CHECK_THAT(s.message(), contains_text("request 0"));
  slots = {0, -1};
  // Past a full window; a write-back state's past none (it keeps no window).
  st.cursors[1].length = Policy::is_writeback ? 1 : 9;
  const replay_cursor bad = st.cursors[1];
  s = decode(p, st);
  CHECK_THAT(s.message(), contains_text("window cursor held a length"));
  CHECK(st.checkpoint_values(0) == before);
  CHECK(std::memcmp(&st.cursors[1], &bad, sizeof bad) == 0);
  if (!whole_requests) return;
  // No head of the request stepped: head 0's cursor and every output are as they were.
  CHECK(st.cursors[0].length == 0);
  CHECK(std::all_of(out.begin(), out.end(), [](float v) { return v == 7.0f; }));
  // Two requests on one slot: reported, neither stepped.
  st.cursors[1] = st.cursors[0];
  slots = {0, 0};
  s = decode(p, st);
  CHECK_THAT(s.message(), contains_text("request 0"));
  CHECK_THAT(s.message(), contains_text("named one state slot"));
  CHECK(st.checkpoint_values(0) == before);
  CHECK(st.cursors[0].length == 0);
  CHECK(std::all_of(out.begin(), out.end(), [](float v) { return v == 7.0f; }));
}

}  // namespace replayssm_test
