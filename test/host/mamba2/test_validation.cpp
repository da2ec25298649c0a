// SPDX-License-Identifier: Apache-2.0
// Mamba-2: bad input to the CPU launchers (decode, verify and commit) gets a descriptive
// error, never a crash or a silent write; pad slots are skipped.
#include <cstring>

#include "../../support/mamba2/harness.hpp"

#include "../../support/catch.hpp"

using namespace replayssm;
using namespace replayssm_test;

namespace {

using policy = replay_policy<8, fp32_format>;

/// A valid problem (H=4, P=16, N=32, G=2, batch 2 on slots {2, 0}, float activations,
/// `tokens` per request) whose params each section then breaks in one way.
template <class Policy>
struct fixture_of {
  mamba2_case c;
  std::mt19937_64 rng;
  mamba2_inputs_host<float> in;
  mamba2_host_state<Policy, float> state;
  std::vector<float> y;
  std::vector<int32_t> slots{2, 0};
  mamba2_params<float> p;

  explicit fixture_of(int tokens = 1, uint64_t seed = 5)
      : c{{4, 16, 32, 2}, 2, 3, true, true, seed},
        rng(seed),
        in(c, rng, tokens),
        state(c.shape, c.num_slots, tokens > 1 ? tokens : 0),
        y(size_t(c.batch) * size_t(tokens) * 4 * 16) {
    in.draw(rng);
    for (int s = 0; s < c.num_slots; ++s) state.set_state(s, mamba2_harness::random_state(c.shape, rng));
    in.bind(p, c);
    state.bind(p, true);
    p.y = y.data();
    p.slot_indices = slots.data();
  }
  /// The error message of a CPU step on the (broken) params.
  std::string error() {
    const status s = cpu::decode_step<Policy>(p);
    REQUIRE_FALSE(s.ok());
    return s.message();
  }
};
using fixture = fixture_of<policy>;

/// A valid verify round of 4 and 2 drafts, 3 and 2 of them accepted.
struct spec_fixture : fixture {
  std::vector<int32_t> drafts{4, 2}, accepted{3, 2};

  spec_fixture() : fixture(4, 88) {
    p.token_counts = drafts.data();
    p.accepted_counts = accepted.data();
  }
  /// The error message of a verify step on the (broken) params.
  std::string verify_error() {
    const status s = cpu::verify_step<policy>(p);
    REQUIRE_FALSE(s.ok());
    return s.message();
  }
};

}  // namespace

TEST_CASE("mamba2: the valid fixture runs", "[mamba2][validation]") {
  fixture f;
  CHECK(cpu::decode_step<policy>(f.p).ok());
}

TEST_CASE("mamba2: each bad input is rejected with a descriptive error", "[mamba2][validation]") {
  fixture f;
  SECTION("null pointers") {
    f.p.x = nullptr;
    CHECK_THAT(f.error(), contains_text("x is null"));
  }
  SECTION("null output") {
    f.p.y = nullptr;
    CHECK_THAT(f.error(), contains_text("y is null"));
  }
  SECTION("null A") {
    f.p.A = nullptr;
    CHECK_THAT(f.error(), contains_text("A is null"));
  }
  SECTION("null checkpoint") {
    f.p.checkpoint = nullptr;
    CHECK_THAT(f.error(), contains_text("checkpoint is null"));
  }
  SECTION("replay without a window") {
    f.p.window_B = nullptr;
    CHECK_THAT(f.error(), contains_text("window"));
  }
  SECTION("replay without cursors") {
    f.p.cursors = nullptr;
    CHECK_THAT(f.error(), contains_text("cursors"));
  }
  SECTION("overlapping rows") {
    f.p.x_head_stride = 8;
    CHECK_THAT(f.error(), contains_text("rows would overlap"));
  }
  SECTION("batch stride too small") {
    f.p.B_batch_stride = 40;
    CHECK_THAT(f.error(), contains_text("batch stride"));
  }
  SECTION("misaligned activations") {
    f.p.C = reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(f.p.C) + 2);
    CHECK_THAT(f.error(), contains_text("not aligned"));
  }
  SECTION("misaligned state") {
    f.p.checkpoint = static_cast<uint8_t*>(f.p.checkpoint) + 4;
    CHECK_THAT(f.error(), contains_text("not aligned to 16 bytes"));
  }
  SECTION("unsupported state_dim") {
    for (int32_t n : {8, 40, 272}) {
      f.p.state_dim = n;
      CHECK_THAT(f.error(), contains_text("unsupported state_dim=" + std::to_string(n)));
    }
  }
  SECTION("head_dim too large") {
    f.p.head_dim = 300;
    CHECK_THAT(f.error(), contains_text("head_dim=300"));
  }
  SECTION("groups must divide heads") {
    f.p.groups = 3;
    CHECK_THAT(f.error(), contains_text("not a multiple of groups=3"));
  }
  SECTION("slot index out of range") {
    f.slots[1] = 3;
    CHECK_THAT(f.error(), contains_text("slot_indices[1]=3 is outside [0, 3)"));
  }
  SECTION("negative slot index that is not the pad id") {
    f.slots[0] = -2;
    CHECK_THAT(f.error(), contains_text("slot_indices[0]=-2"));
  }
  SECTION("pad id naming a real slot") {
    f.p.pad_slot_id = 1;
    CHECK_THAT(f.error(), contains_text("pad_slot_id=1 names a real slot"));
  }
  SECTION("batch larger than the pool without slot indices") {
    f.p.slot_indices = nullptr;
    f.p.batch = 4;
    CHECK_THAT(f.error(), contains_text("exceeds num_slots=3"));
  }
  SECTION("flush phase out of range") {
    f.state.phase[2] = 8;
    CHECK_THAT(f.error(), contains_text("flush_phase[2]=8"));
  }
  SECTION("window length out of range") {
    f.state.cursors[size_t(2) * 4 + 1].length = 9;  // a full window (8) is valid after a commit
    CHECK_THAT(f.error(), contains_text("window cursor held a length"));
  }
  SECTION("stochastic rounding without cursors") {
    f.p.cursors = nullptr;
    const status s = cpu::decode_step<writeback_policy<fp32_format, round_stochastic>>(f.p);
    CHECK_THAT(s.message(), contains_text("stochastic rounding needs cursors"));
  }
}

TEST_CASE("mamba2: an empty batch is a valid no-op", "[mamba2][validation]") {
  fixture f;
  f.p.batch = 0;
  CHECK(cpu::decode_step<policy>(f.p).ok());
}

TEST_CASE("mamba2: a shared slot or one bad cursor steps nothing", "[mamba2][validation]") {
  fixture f;
  // The error of a decode step on `f`, which must leave every byte as it was.
  const auto rejected = [&f] {
    const std::vector<uint8_t> before = f.state.bytes();
    const std::vector<float> y_before = f.y;
    const std::string message = f.error();
    CHECK(f.state.bytes() == before);
    CHECK(f.y == y_before);
    return message;
  };
  SECTION("two requests on one slot") {
    f.slots = {2, 2};
    CHECK_THAT(rejected(), contains_text("slot_indices[0]=2 repeats slot_indices[1]"));
  }
  SECTION("the cursor of the last head of the last request") {
    f.state.cursors[3].length = 99;  // slot 0 (request 1), head 3: every other head could step
    const std::string message = rejected();
    CHECK_THAT(message, contains_text("request 1 (slot 0, head 3): a window cursor held a length or ring start"));
    CHECK_THAT(message, contains_text("cursors[3] holds length=99"));
  }
  SECTION("a flush phase") {
    f.state.phase[0] = 9;
    CHECK_THAT(rejected(), contains_text("flush_phase[0]=9 is outside [0, window=8)"));
  }
  SECTION("heads of one slot that would not flush together") {
    // Every cursor is valid on its own, but head 2 of slot 0 would flush while the others
    // read: no step leaves a slot so, and a GPU step runs reading and flushing requests in
    // separate launches.
    f.state.cursors[2].length = 7;
    f.state.cursors[2].flush_count = 1;
    const std::string message = rejected();
    CHECK_THAT(message, contains_text("request 1 (slot 0)"));
    CHECK_THAT(message, contains_text("the cursors of its heads disagree"));
  }
}

TEST_CASE("mamba2: a write-back cursor holding a window entry steps nothing", "[mamba2][validation]") {
  // A write-back state keeps no window: a cursor that holds an entry is one no step leaves,
  // and stepping it would read a window that does not exist.
  fixture_of<writeback_policy<fp32_format>> f;
  f.state.cursors[1].length = 1;  // slot 0 (request 1), head 1
  const std::vector<uint8_t> before = f.state.bytes();
  const std::vector<float> y_before = f.y;
  CHECK_THAT(f.error(), contains_text("request 1 (slot 0, head 1): a window cursor held a length or ring start"));
  CHECK(f.state.bytes() == before);
  CHECK(f.y == y_before);
}

TEST_CASE("mamba2: pad rows are skipped and their slots untouched", "[mamba2][validation]") {
  fixture f;
  f.slots = {-1, 1};
  f.p.slot_indices = f.slots.data();
  const float poison = 12345.0f;
  std::fill(f.y.begin(), f.y.end(), poison);
  const auto before = f.state.checkpoint;
  const auto cursors_before = f.state.cursors;
  for (int t = 0; t < 20; ++t) REQUIRE(cpu::decode_step<policy>(f.p).ok());
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
    CHECK(f.state.cursors[size_t(h)].flush_count == cursors_before[size_t(h)].flush_count);
    CHECK(f.state.cursors[size_t(4 + h)].flush_count > 0);
  }
}

TEST_CASE("mamba2: bad speculative input is rejected with a descriptive error", "[mamba2][validation][spec]") {
  spec_fixture f;
  SECTION("the valid round runs") {
    CHECK(cpu::verify_step<policy>(f.p).ok());
    CHECK(cpu::commit_drafts(f.p).ok());
  }
  SECTION("more drafts than the supported maximum") {
    f.p.tokens = 9;
    CHECK_THAT(f.verify_error(), contains_text("tokens=9 is outside [1, max_draft_tokens=8]"));
  }
  SECTION("more drafts than the window holds") {
    f.p.tokens = 5;
    const status s = cpu::verify_step<replay_policy<4, fp32_format>>(f.p);
    CHECK_THAT(s.message(), contains_text("tokens=5 drafts do not fit the window of 4"));
  }
  SECTION("a window ring too short for the drafts") {
    f.p.window_entries = 8;
    CHECK_THAT(f.verify_error(),
               contains_text("window_entries=8 is too short for a verify step: it needs window + tokens = 12"));
  }
  SECTION("a request's draft count beyond tokens") {
    f.drafts[1] = 5;
    CHECK_THAT(f.verify_error(), contains_text("token_counts[1]=5 is outside [1, tokens=4]"));
  }
  SECTION("no drafts") {
    f.drafts[0] = 0;
    CHECK_THAT(f.verify_error(), contains_text("token_counts[0]=0"));
  }
  SECTION("drafts through the decode step") {
    const status s = cpu::decode_step<policy>(f.p);
    CHECK_THAT(s.message(), contains_text("a decode step takes one token per request"));
  }
  SECTION("a replay verify's validation under a write-back policy") {
    // (verify_step under a write-back policy is the snapshot baseline: see below.)
    const status s = validate_mamba2<writeback_policy<fp32_format>>(f.p, true, step_kind::verify);
    CHECK_THAT(s.message(), contains_text("the verify step needs a replay policy"));
  }
  SECTION("accepting more drafts than were verified") {
    REQUIRE(cpu::verify_step<policy>(f.p).ok());
    const auto cursors = f.state.cursors;
    f.accepted[1] = 3;  // request 1 verified 2
    const status s = cpu::commit_drafts(f.p);
    CHECK_THAT(s.message(), contains_text("accepted_counts[1]=3 is outside [0, 2]"));
    f.accepted[1] = -1;
    CHECK_THAT(cpu::commit_drafts(f.p).message(), contains_text("accepted_counts[1]=-1"));
    CHECK(std::memcmp(cursors.data(), f.state.cursors.data(), cursors.size() * sizeof(replay_cursor)) == 0);
  }
  SECTION("committing twice: the second finds no pending drafts") {
    REQUIRE(cpu::verify_step<policy>(f.p).ok());
    REQUIRE(cpu::commit_drafts(f.p).ok());
    const int32_t length = f.state.cursors[size_t(2) * 4].length;
    CHECK_THAT(cpu::commit_drafts(f.p).message(), contains_text("commit accepted more drafts than were verified"));
    CHECK(f.state.cursors[size_t(2) * 4].length == length);
  }
  SECTION("a commit without accepted counts") {
    f.p.accepted_counts = nullptr;
    CHECK_THAT(cpu::commit_drafts(f.p).message(), contains_text("accepted_counts are null"));
  }
  SECTION("the snapshot baseline without snapshot slots") {
    CHECK_THAT(cpu::verify_step<writeback_policy<fp32_format>>(f.p).message(),
               contains_text("snapshot_slots are null"));
  }
}
