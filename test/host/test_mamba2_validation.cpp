// SPDX-License-Identifier: Apache-2.0
// Bad input gets a descriptive error, never a crash or a silent write; pad slots are skipped.
#include <cstring>

#include "../support/mamba2_harness.hpp"

#include <catch2/catch.hpp>

using namespace replayssm;
using namespace replayssm_test;

namespace {

using policy = replay_policy<8, fp32_format>;

/// A valid problem whose params each section then breaks in one way.
struct fixture {
  mamba2_case c{{4, 16, 32, 2}, 2, 3, true, true, 5};
  std::mt19937_64 rng{5};
  mamba2_inputs_host<float> in{c, rng};
  host_layer_state<policy, float> state{c.shape, c.num_slots};
  std::vector<float> y = std::vector<float>(size_t(c.batch) * 4 * 16);
  std::vector<int32_t> slots{2, 0};
  mamba2_params p;

  fixture() {
    in.draw(rng);
    for (int s = 0; s < c.num_slots; ++s) state.set_state(s, random_state(c.shape, rng));
    in.bind(p, c);
    state.bind(p, true);
    p.y = y.data();
    p.slot_indices = slots.data();
  }
  /// The error message of a CPU step on the (broken) params.
  std::string error() {
    const status s = cpu::mamba2_decode_step<policy>(p);
    REQUIRE_FALSE(s.ok());
    return s.message();
  }
};

}  // namespace

TEST_CASE("the valid fixture runs", "[validation]") {
  fixture f;
  CHECK(cpu::mamba2_decode_step<policy>(f.p).ok());
}

TEST_CASE("each bad input is rejected with a descriptive error", "[validation]") {
  using Catch::Matchers::Contains;
  fixture f;
  SECTION("null pointers") {
    f.p.x = nullptr;
    CHECK_THAT(f.error(), Contains("x is null"));
  }
  SECTION("null output") {
    f.p.y = nullptr;
    CHECK_THAT(f.error(), Contains("y is null"));
  }
  SECTION("null A") {
    f.p.A = nullptr;
    CHECK_THAT(f.error(), Contains("A is null"));
  }
  SECTION("null checkpoint") {
    f.p.checkpoint = nullptr;
    CHECK_THAT(f.error(), Contains("checkpoint is null"));
  }
  SECTION("replay without a window") {
    f.p.window_B = nullptr;
    CHECK_THAT(f.error(), Contains("window"));
  }
  SECTION("replay without cursors") {
    f.p.cursors = nullptr;
    CHECK_THAT(f.error(), Contains("cursors"));
  }
  SECTION("overlapping rows") {
    f.p.x_head_stride = 8;
    CHECK_THAT(f.error(), Contains("rows would overlap"));
  }
  SECTION("batch stride too small") {
    f.p.B_batch_stride = 40;
    CHECK_THAT(f.error(), Contains("batch stride"));
  }
  SECTION("misaligned activations") {
    f.p.C = reinterpret_cast<const uint8_t*>(f.p.C) + 2;
    CHECK_THAT(f.error(), Contains("not aligned"));
  }
  SECTION("misaligned state") {
    f.p.checkpoint = static_cast<uint8_t*>(f.p.checkpoint) + 4;
    CHECK_THAT(f.error(), Contains("not aligned to 16 bytes"));
  }
  SECTION("unsupported state_dim") {
    for (int32_t n : {8, 40, 272}) {
      f.p.state_dim = n;
      CHECK_THAT(f.error(), Contains("unsupported state_dim=" + std::to_string(n)));
    }
  }
  SECTION("head_dim too large") {
    f.p.head_dim = 300;
    CHECK_THAT(f.error(), Contains("head_dim=300"));
  }
  SECTION("groups must divide heads") {
    f.p.groups = 3;
    CHECK_THAT(f.error(), Contains("not a multiple of groups=3"));
  }
  SECTION("unsupported dtype") {
    f.p.act_dtype = static_cast<dtype>(7);
    CHECK_THAT(f.error(), Contains("unsupported activation dtype"));
  }
  SECTION("slot index out of range") {
    f.slots[1] = 3;
    CHECK_THAT(f.error(), Contains("slot_indices[1]=3 is outside [0, 3)"));
  }
  SECTION("negative slot index that is not the pad id") {
    f.slots[0] = -2;
    CHECK_THAT(f.error(), Contains("slot_indices[0]=-2"));
  }
  SECTION("pad id naming a real slot") {
    f.p.pad_slot_id = 1;
    CHECK_THAT(f.error(), Contains("pad_slot_id=1 names a real slot"));
  }
  SECTION("batch larger than the pool without slot indices") {
    f.p.slot_indices = nullptr;
    f.p.batch = 4;
    CHECK_THAT(f.error(), Contains("exceeds num_slots=3"));
  }
  SECTION("flush phase out of range") {
    f.state.phase[2] = 8;
    CHECK_THAT(f.error(), Contains("flush_phase[2]=8"));
  }
  SECTION("window length out of range") {
    f.state.cursors[size_t(2) * 4 + 1].length = 9;  // a full window (8) is valid after a commit
    CHECK_THAT(f.error(), Contains("window cursor held a length"));
  }
  SECTION("stochastic rounding without cursors") {
    f.p.cursors = nullptr;
    const status s = cpu::naive_decode_step<fp32_format, round_stochastic>(f.p);
    CHECK_THAT(s.message(), Contains("stochastic rounding needs cursors"));
  }
}

TEST_CASE("an empty batch is a valid no-op", "[validation]") {
  fixture f;
  f.p.batch = 0;
  CHECK(cpu::mamba2_decode_step<policy>(f.p).ok());
}

TEST_CASE("pad rows are skipped and their slots untouched", "[validation]") {
  fixture f;
  f.slots = {-1, 1};
  f.p.slot_indices = f.slots.data();
  const float poison = 12345.0f;
  std::fill(f.y.begin(), f.y.end(), poison);
  const auto before = f.state.checkpoint;
  const auto cursors_before = f.state.cursors;
  for (int t = 0; t < 20; ++t) REQUIRE(cpu::mamba2_decode_step<policy>(f.p).ok());
  // The pad row's output is never written.
  CHECK(std::all_of(f.y.begin(), f.y.begin() + 64, [&](float v) { return v == poison; }));
  CHECK(std::none_of(f.y.begin() + 64, f.y.end(), [&](float v) { return v == poison; }));
  // Slots 0 and 2 (not used) are untouched; slot 1 changed.
  const size_t slot_bytes = f.state.sizes.checkpoint / 3;
  const auto* a = reinterpret_cast<const uint8_t*>(before.data());
  const auto* b = reinterpret_cast<const uint8_t*>(f.state.checkpoint.data());
  CHECK(std::memcmp(a, b, slot_bytes) == 0);
  CHECK(std::memcmp(a + 2 * slot_bytes, b + 2 * slot_bytes, slot_bytes) == 0);
  CHECK(std::memcmp(a + slot_bytes, b + slot_bytes, slot_bytes) != 0);
  for (int h = 0; h < 4; ++h) {
    CHECK(f.state.cursors[size_t(h)].flushes == cursors_before[size_t(h)].flushes);
    CHECK(f.state.cursors[size_t(4 + h)].flushes > 0);
  }
}
