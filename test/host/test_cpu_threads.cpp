// SPDX-License-Identifier: Apache-2.0
// The CPU launchers' ParallelFor (runtime/cpu_launch.hpp): a step spread over threads, or
// run in another order, gives the bits of the serial step, and is rejected whole as the
// serial step is.
#include "../support/gated_deltanet/harness.hpp"
#include "../support/mamba2/harness.hpp"

using namespace replayssm;
using namespace replayssm_test;

namespace {

/// Every item, last first, on the calling thread.
struct reversed_for {
  template <class Body>
  void operator()(int64_t count, Body&& body) const {
    for (int64_t i = count - 1; i >= 0; --i) body(i);
  }
};

/// `steps` CPU decode steps of two copies of one state, one serial and one spread by
/// `parallel_for` (staggered phases for replay); every step's state bytes and outputs
/// must agree.
template <class Harness, class Policy, class Act, class ParallelFor>
void check_against_serial(const typename Harness::case_type& c, int steps, const ParallelFor& parallel_for) {
  using state_t = typename Harness::template state<Policy, Act>;
  std::mt19937_64 rng(c.seed);
  typename Harness::template inputs<Act> in(c, rng);
  state_t serial(c.shape, c.num_slots), spread(c.shape, c.num_slots);
  for (int slot = 0; slot < c.num_slots; ++slot) {
    const std::vector<double> initial = Harness::random_state(c.shape, rng);
    for (state_t* st : {&serial, &spread}) {
      st->set_state(slot, initial);
      st->phase[size_t(slot)] = (slot * 5 + 3) % Policy::window;
    }
  }
  const std::vector<int32_t> slots = request_slots(c);
  std::vector<Act> out_serial(Harness::outputs(c.shape) * size_t(c.batch)), out_spread(out_serial.size());
  for (int t = 0; t < steps; ++t) {
    in.draw(rng);
    typename state_t::params p;
    in.bind(p, c);
    p.slot_indices = slots.data();
    p.seed = c.seed;
    serial.bind(p, !Policy::is_writeback);
    Harness::output(p) = out_serial.data();
    REQUIRE(Harness::template cpu_decode<Policy>(p).ok());
    spread.bind(p, !Policy::is_writeback);
    Harness::output(p) = out_spread.data();
    REQUIRE(Harness::template cpu_decode<Policy>(p, parallel_for).ok());
    INFO("step " << t);
    REQUIRE(spread.bytes() == serial.bytes());
    REQUIRE(std::memcmp(out_spread.data(), out_serial.data(), out_serial.size() * sizeof(Act)) == 0);
  }
}

template <class ParallelFor>
void check_both_recurrences(const ParallelFor& parallel_for) {
  const mamba2_case m{{6, 16, 32, 2}, 5, 7, true, true, 41};
  check_against_serial<mamba2_harness, writeback_policy<fp32_format>, float>(m, 20, parallel_for);
  check_against_serial<mamba2_harness, replay_policy<8, fp32_format>, bfloat16_t>(m, 40, parallel_for);
  check_against_serial<mamba2_harness, replay_policy<8, nvfp4_format, fp16_format, round_stochastic>, bfloat16_t>(
      m, 40, parallel_for);
  const gdn_case g{gdn_odd_shape, 5, 7, 42};
  check_against_serial<gdn_harness, writeback_policy<fp32_format>, float>(g, 20, parallel_for);
  check_against_serial<gdn_harness, replay_policy<8, fp32_format>, bfloat16_t>(g, 40, parallel_for);
  check_against_serial<gdn_harness, gdn_policy<replay_policy<8, bf16_format, fp32_format>, gdn_window::raw_inputs>,
                       float>(g, 40, parallel_for);
}

}  // namespace

TEST_CASE("cpu steps spread over threads or reordered give the serial step's bits", "[cpu][threads]") {
  SECTION("four threads") { check_both_recurrences(cpu::thread_for{4}); }
  SECTION("more threads than heads") { check_both_recurrences(cpu::thread_for{64}); }
  SECTION("last item first") { check_both_recurrences(reversed_for{}); }
}

TEST_CASE("a cpu step spread over threads rejects a bad request before it steps any head", "[cpu][threads][validation]") {
  using policy = replay_policy<8, fp32_format>;
  const mamba2_case c{{6, 16, 32, 2}, 3, 5, true, true, 43};
  std::mt19937_64 rng(c.seed);
  mamba2_inputs_host<float> in(c, rng);
  mamba2_host_state<policy, float> st(c.shape, c.num_slots);
  const std::vector<int32_t> slots = request_slots(c);
  std::vector<float> y(mamba2_harness::outputs(c.shape) * size_t(c.batch));
  in.draw(rng);
  mamba2_params<float> p;
  in.bind(p, c);
  p.slot_indices = slots.data();
  st.bind(p, false);
  p.y = y.data();
  st.cursors[size_t(slots[1]) * c.shape.heads + 4].length = policy::window + 3;  // past the ring
  const std::vector<uint8_t> before = st.bytes();
  const status serial = cpu::decode_step<policy>(p);
  const status spread = cpu::decode_step<policy>(p, cpu::thread_for{4});
  REQUIRE_FALSE(serial.ok());
  CHECK(spread.message() == serial.message());
  CHECK(st.bytes() == before);
}
