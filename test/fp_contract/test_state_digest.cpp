// SPDX-License-Identifier: Apache-2.0
// Checkpoints are bit-identical on the CPU and the GPU only if the host code rounds every
// multiply and add on its own, as the device code does (math::mul and math::add): a host
// compiler allowed FMA instructions (-mfma, -march=native) would otherwise fuse a product
// with the sum it feeds (GCC's default -ffp-contract=fast). The library's usage requirement
// -ffp-contract=off (CMakeLists.txt) prevents it. This test is built twice
// (test/CMakeLists.txt): with the project's usual host flags it writes a digest of every
// state byte and output of both recurrences' CPU steps over a few windows; built with FMA
// instructions and -ffp-contract=fast asked for, it must find the same digest.
#include "../support/gated_deltanet/harness.hpp"
#include "../support/mamba2/harness.hpp"

#include <cstdlib>
#include <fstream>
#include <string>

using namespace replayssm;
using namespace replayssm_test;

namespace {

/// 64-bit FNV-1a over every byte added.
struct digest {
  uint64_t value = 14695981039346656037ull;
  void add(const void* bytes, size_t n) {
    for (size_t i = 0; i < n; ++i) value = (value ^ static_cast<const uint8_t*>(bytes)[i]) * 1099511628211ull;
  }
};

/// `steps` CPU decode steps of `Harness`'s recurrence under `Policy` (staggered phases for
/// replay), each step's state bytes and outputs added to `d`.
template <class Harness, class Policy, class Act>
void add_steps(const typename Harness::case_type& c, int steps, digest& d) {
  std::mt19937_64 rng(c.seed);
  typename Harness::template inputs<Act> in(c, rng);
  typename Harness::template state<Policy, Act> st(c.shape, c.num_slots);
  for (int slot = 0; slot < c.num_slots; ++slot) {
    st.set_state(slot, Harness::random_state(c.shape, rng));
    st.phase[size_t(slot)] = (slot * 5 + 3) % Policy::window;
  }
  const std::vector<int32_t> slots = request_slots(c);
  std::vector<Act> out(Harness::outputs(c.shape) * size_t(c.batch));
  for (int t = 0; t < steps; ++t) {
    in.draw(rng);
    typename Harness::template state<Policy, Act>::params p;
    in.bind(p, c);
    p.slot_indices = slots.data();
    p.seed = c.seed;
    st.bind(p, !Policy::is_writeback);
    Harness::output(p) = out.data();
    const status s = Harness::template cpu_decode<Policy>(p);
    INFO("step " << t << ": " << s.message());
    REQUIRE(s.ok());
    const std::vector<uint8_t> bytes = st.bytes();
    d.add(bytes.data(), bytes.size());
    d.add(out.data(), out.size() * sizeof(Act));
  }
}

}  // namespace

TEST_CASE("the CPU steps give the same bits when the compiler may fuse multiplies and adds", "[fp_contract]") {
  digest d;
  const mamba2_case m{{4, 16, 32, 2}, 3, 5, true, true, 21};
  add_steps<mamba2_harness, writeback_policy<fp32_format>, float>(m, 40, d);
  add_steps<mamba2_harness, replay_policy<16, fp32_format>, bfloat16_t>(m, 40, d);
  add_steps<mamba2_harness, replay_policy<16, nvfp4_format, fp16_format, round_stochastic>, bfloat16_t>(m, 40, d);
  const gdn_case g{gdn_odd_shape, 3, 5, 22};
  add_steps<gdn_harness, writeback_policy<fp32_format>, float>(g, 40, d);
  add_steps<gdn_harness, replay_policy<16, fp32_format>, bfloat16_t>(g, 40, d);
  add_steps<gdn_harness, gdn_policy<replay_policy<8, bf16_format, fp32_format, round_stochastic>, gdn_window::raw_inputs>,
            float>(g, 40, d);
  const std::string value = std::to_string(d.value);
  INFO("digest " << value);
  if (const char* path = std::getenv("REPLAYSSM_DIGEST_WRITE")) {
    std::ofstream(path) << value;
  } else {
    const char* expected_path = std::getenv("REPLAYSSM_DIGEST_EXPECT");
    REQUIRE(expected_path != nullptr);
    std::string expected;
    std::ifstream(expected_path) >> expected;
    CHECK(value == expected);
  }
}
