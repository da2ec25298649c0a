// SPDX-License-Identifier: Apache-2.0
// Gated DeltaNet: every bad input to the CPU launchers gets a descriptive error, never a
// crash, and a rejected step writes nothing (state, window, cursors, output, slot arrays).
// A verify whose drafts are rejected, or that fails, never touches the checkpoint.
#include <cstring>

#include "../../../examples/custom_policy/mxfp4_format.hpp"
#include "../../support/gated_deltanet/harness.hpp"

#include "../../support/catch.hpp"

using namespace replayssm;
using namespace replayssm_test;

namespace {

using replay8 = replay_policy<8, fp32_format>;
using writeback32 = writeback_policy<fp32_format>;

template <class T>
std::vector<uint8_t> bytes(const std::vector<T>& v) {
  const auto* b = reinterpret_cast<const uint8_t*>(v.data());
  return std::vector<uint8_t>(b, b + v.size() * sizeof(T));
}

/// `ptr` moved by `n` bytes (a misaligned pointer).
template <class T>
T* shifted(T* ptr, int n) {
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(ptr) + uintptr_t(n));
}

/// A valid problem (HV=4, HK=2, K=32, V=16, batch 2 on slots {2, 0}, float activations,
/// `tokens` per request) whose params each case then breaks in one way.
template <class Policy>
struct fixture {
  gdn_case c;
  std::mt19937_64 rng;
  gdn_inputs_host<float> in;
  gdn_host_state<Policy, float> state;
  std::vector<float> o;
  std::vector<int32_t> slots{2, 0}, counts, accepted, snapshots;
  gdn_params<float> p;

  explicit fixture(int tokens = 1, int num_slots = 3)
      : c{{4, 2, 32, 16}, 2, num_slots, 11},
        rng(c.seed),
        in(c, rng, tokens),
        state(c.shape, num_slots, tokens > 1 ? tokens : 0),
        o(size_t(c.batch) * size_t(tokens) * 4 * 16) {
    in.draw(rng);
    for (int s = 0; s < num_slots; ++s) state.set_state(s, gdn_harness::random_state(c.shape, rng));
    in.bind(p, c);
    state.bind(p, true);
    p.o = o.data();
    p.slot_indices = slots.data();
    p.seed = 7;
  }

  /// Every byte a step or a commit could write.
  std::vector<std::vector<uint8_t>> memory() const {
    return {bytes(state.checkpoint), bytes(state.checkpoint_scales), bytes(state.read_copy),
            bytes(state.read_copy_scales), bytes(state.window_u), bytes(state.window_k),
            bytes(state.window_g), bytes(state.window_v), bytes(state.window_beta),
            bytes(state.cursors), bytes(o), bytes(slots), bytes(snapshots)};
  }

  /// The error message of `step` on the (broken) params; checks that nothing was written.
  template <class Step>
  std::string error(Step step) {
    const auto before = memory();
    const status s = step(p);
    REQUIRE_FALSE(s.ok());
    CHECK(memory() == before);
    return s.message();
  }
};

template <class Policy>
status decode(const gdn_params<float>& p) {
  return cpu::decode_step<Policy>(p);
}
template <class Policy>
status verify(const gdn_params<float>& p) {
  return cpu::verify_step<Policy>(p);
}
status commit(const gdn_params<float>& p) { return cpu::commit_drafts(p); }
status snapshot_verify(const gdn_params<float>& p) { return cpu::verify_step<writeback_policy<fp32_format>>(p); }

/// A checker: builds `Fixture(args...)`, breaks it with `breaks` and checks that `step`
/// then fails, writes nothing and says `says`.
template <class Fixture, class Step, class... Args>
auto rejector(Step step, Args... args) {
  return [=](auto breaks, const std::string& says) {
    Fixture f(args...);
    breaks(f);
    CHECK_THAT(f.error(step), contains_text(says));
  };
}

}  // namespace

TEST_CASE("gdn: the valid fixtures run", "[gdn][validation]") {
  fixture<replay8> f;
  const auto before = f.memory();
  CHECK(cpu::decode_step<replay8>(f.p).ok());
  CHECK(f.memory() != before);  // the no-write checks below compare live memory
  CHECK(cpu::decode_step<replay8>(f.p).ok());
  fixture<writeback32> n;
  CHECK(cpu::decode_step<writeback_policy<fp32_format>>(n.p).ok());
  n.p.cursors = nullptr;  // optional for nearest-even write-back
  CHECK(cpu::decode_step<writeback_policy<fp32_format>>(n.p).ok());
  fixture<replay8> v(3);
  CHECK(cpu::verify_step<replay8>(v.p).ok());
  fixture<gdn_policy<replay8, gdn_window::raw_inputs>> r;
  CHECK(cpu::decode_step<gdn_policy<replay8, gdn_window::raw_inputs>>(r.p).ok());
  fixture<replay_policy<16, bf16_format, fp32_format>> split;
  CHECK(cpu::decode_step<replay_policy<16, bf16_format, fp32_format>>(split.p).ok());
  fixture<replay_policy<8, nvfp4_format>> fp4;
  CHECK(cpu::decode_step<replay_policy<8, nvfp4_format>>(fp4.p).ok());
  fixture<replay_policy<8, nvfp4_format, fp16_format>> fp4_read;
  CHECK(cpu::decode_step<replay_policy<8, nvfp4_format, fp16_format>>(fp4_read.p).ok());
  fixture<writeback_policy<fp8_e4m3_format>> fp8;
  CHECK(cpu::decode_step<writeback_policy<fp8_e4m3_format>>(fp8.p).ok());
  fixture<writeback_policy<fp32_format, round_stochastic>> stochastic;
  CHECK(cpu::decode_step<writeback_policy<fp32_format, round_stochastic>>(stochastic.p).ok());
  fixture<replay_policy<8, my_engine::mxfp4_format, fp32_format>> mx;
  CHECK(cpu::decode_step<replay_policy<8, my_engine::mxfp4_format, fp32_format>>(mx.p).ok());
  fixture<writeback32> s(2, 6);
  s.snapshots = {1, 3, 4, 5};
  s.p.snapshot_slots = s.snapshots.data();
  CHECK(cpu::verify_step<writeback_policy<fp32_format>>(s.p).ok());
}

TEST_CASE("gdn: bad shapes, tokens, dtype and slot fields are rejected", "[gdn][validation]") {
  using F = fixture<replay8>;
  auto rejects = rejector<F>(decode<replay8>);
  rejects([](F& f) { f.p.batch = -1; }, "batch=-1 is negative");
  rejects([](F& f) { f.p.heads = 0; }, "must be positive (heads=0,");
  rejects([](F& f) { f.p.key_heads = 0; }, "key_heads=0,");
  rejects([](F& f) { f.p.key_heads = -2; }, "key_heads=-2,");
  rejects([](F& f) { f.p.value_dim = 0; }, "value_dim=0)");
  rejects([](F& f) { f.p.heads = 3; }, "heads=3 is not a multiple of key_heads=2");
  rejects([](F& f) { f.p.key_heads = 8; }, "heads=4 is not a multiple of key_heads=8");
  rejects([](F& f) { f.p.value_dim = gdn_max_value_dim + 1; }, "value_dim=257 exceeds the supported maximum 256");
  for (int32_t k : {0, 8, 24, 40, 144})
    rejects([k](F& f) { f.p.key_dim = k; }, "unsupported key_dim=" + std::to_string(k) + ": must be a multiple of 16 in [16, 128]");
  // A key_dim that is a multiple of 16 but not of a format's chunk (MXFP4 chunks are 32).
  using mx = replay_policy<8, my_engine::mxfp4_format, fp32_format>;
  rejector<fixture<mx>>(decode<mx>)([](fixture<mx>& f) { f.p.key_dim = 48; },
                                    "key_dim=48 is not a multiple of the formats' chunk (fp32, mxfp4)");
  rejects([](F& f) { f.p.tokens = 2; }, "a decode step takes one token per request (tokens=2)");
  rejects([](F& f) { f.p.tokens = 0; }, "a decode step takes one token per request (tokens=0)");
  rejects([](F& f) { f.p.token_counts = (f.counts = {1, 1}).data(); }, "a decode step takes one token per request");
  rejects([](F& f) { f.p.window_entries = 5; }, "window_entries=5 is shorter than the window 8");
  rejects([](F& f) { f.p.window_entries = -1; }, "window_entries=-1 is shorter than the window 8");
  rejects([](F& f) { f.p.num_slots = 0; }, "num_slots=0 must be positive");
  rejects([](F& f) { f.p.num_slots = -3; }, "num_slots=-3 must be positive");
  rejects([](F& f) { f.p.slot_indices = nullptr, f.p.batch = 4; },
          "without slot_indices request b uses slot b, but batch=4 exceeds num_slots=3");
  rejects([](F& f) { f.p.pad_slot_id = 1; }, "pad_slot_id=1 names a real slot (num_slots=3)");
  rejects([](F& f) { f.slots[1] = 3; }, "slot_indices[1]=3 is outside [0, 3) and is not the pad id -1");
  rejects([](F& f) { f.slots[0] = -2; }, "slot_indices[0]=-2 is outside [0, 3)");
  rejects([](F& f) { f.state.phase[2] = 8; }, "flush_phase[2]=8 is outside [0, window=8)");
  rejects([](F& f) { f.state.phase[0] = -1; }, "flush_phase[0]=-1 is outside");
  rejects([](F& f) { f.slots = {2, 2}; }, "slot_indices[0]=2 repeats slot_indices[1]: two requests of one step cannot share a state slot");
  // Head 3 of request 1 (slot 0): every other head could step, and none does.
  rejects([](F& f) { f.state.cursors[3].length = 99; }, "request 1 (slot 0, head 3)");
  rejector<fixture<replay8>>(verify<replay8>, 3)([](fixture<replay8>& f) { f.state.cursors[3].start = -1; },
                                                 "cursors[3] holds length=0 start=-1");
}

TEST_CASE("gdn: bad activations and weights are rejected", "[gdn][validation]") {
  using F = fixture<replay8>;
  auto rejects = rejector<F>(decode<replay8>);
  rejects([](F& f) { f.p.q = nullptr; }, "gated_deltanet: q is null");
  rejects([](F& f) { f.p.k = nullptr; }, "gated_deltanet: k is null");
  rejects([](F& f) { f.p.v = nullptr; }, "gated_deltanet: v is null");
  rejects([](F& f) { f.p.o = nullptr; }, "gated_deltanet: o is null");
  rejects([](F& f) { f.p.a = nullptr; }, "gated_deltanet: a is null");
  rejects([](F& f) { f.p.b = nullptr; }, "gated_deltanet: b is null");
  rejects([](F& f) { f.p.A_log = nullptr; }, "gated_deltanet: A_log is null");
  rejects([](F& f) { f.p.v = shifted(f.p.v, 2); }, "v is not aligned to its element size (4 bytes)");
  rejects([](F& f) { f.p.o = shifted(f.p.o, 1); }, "o is not aligned to its element size (4 bytes)");
  rejects([](F& f) { f.p.q_head_stride = 16; }, "q: row stride=16 is smaller than the row length 32 (rows would overlap)");
  rejects([](F& f) { f.p.o_head_stride = 8; }, "o: row stride=8 is smaller than the row length 16");
  rejects([](F& f) { f.p.a_head_stride = 0; }, "a: row stride=0 is smaller than the row length 1");
  rejects([](F& f) { f.p.k_batch_stride = 63; }, "k: batch stride=63 is smaller than one request's extent 64");
  rejects([](F& f) { f.p.v_batch_stride = 48; }, "v: batch stride=48 is smaller than one request's extent 64");
  rejects([](F& f) { f.p.b_batch_stride = 3; }, "b: batch stride=3 is smaller than one request's extent 4");
}

TEST_CASE("gdn: bad state, window and cursor buffers are rejected", "[gdn][validation]") {
  using F = fixture<replay8>;
  auto rejects = rejector<F>(decode<replay8>);
  rejects([](F& f) { f.p.checkpoint = nullptr; }, "gated_deltanet: checkpoint is null");
  rejects([](F& f) { f.p.checkpoint = shifted(f.p.checkpoint, 4); },
          "checkpoint is not aligned to 16 bytes (fp32 chunks are loaded as vectors)");
  rejects([](F& f) { f.p.window_u = nullptr; }, "replay needs window_u, window_k and window_g");
  rejects([](F& f) { f.p.window_k = nullptr; }, "replay needs window_u, window_k and window_g");
  rejects([](F& f) { f.p.window_g = nullptr; }, "replay needs window_u, window_k and window_g");
  rejects([](F& f) { f.p.window_g = shifted(f.p.window_g, 2); }, "a window buffer is not aligned");
  rejects([](F& f) { f.p.cursors = nullptr; }, "replay needs cursors");
  rejects([](F& f) { f.p.cursors = shifted(f.p.cursors, 2); }, "cursors are misaligned");

  using split = replay_policy<16, bf16_format, fp32_format>;
  auto rejects_split = rejector<fixture<split>>(decode<split>);
  rejects_split([](fixture<split>& f) { f.p.read_copy = nullptr; }, "gated_deltanet: read_copy is null");
  rejects_split([](fixture<split>& f) { f.p.read_copy = shifted(f.p.read_copy, 2); },
                "read_copy is not aligned to 16 bytes (bf16 chunks");

  using fp4 = replay_policy<8, nvfp4_format>;
  rejector<fixture<fp4>>(decode<fp4>)([](fixture<fp4>& f) { f.p.checkpoint_scales = nullptr; },
                                      "checkpoint scales are null (nvfp4 is a scaled format)");
  using fp4_read = replay_policy<8, nvfp4_format, fp16_format>;
  rejector<fixture<fp4_read>>(decode<fp4_read>)([](fixture<fp4_read>& f) { f.p.read_copy_scales = nullptr; },
                                                "read_copy scales are null (nvfp4 is a scaled format)");
  using fp8 = writeback_policy<fp8_e4m3_format>;
  rejector<fixture<fp8>>(decode<fp8>)([](fixture<fp8>& f) { f.p.checkpoint_scales = shifted(f.p.checkpoint_scales, 1); },
                                      "checkpoint scales are misaligned");

  using R = fixture<gdn_policy<replay8, gdn_window::raw_inputs>>;
  auto rejects_raw = rejector<R>(decode<gdn_policy<replay8, gdn_window::raw_inputs>>);
  rejects_raw([](R& f) { f.p.window_v = nullptr; }, "the raw_inputs window mode needs window_v and window_beta");
  rejects_raw([](R& f) { f.p.window_beta = nullptr; }, "the raw_inputs window mode needs window_v and window_beta");
  rejects_raw([](R& f) { f.p.window_v = shifted(f.p.window_v, 2); }, "window_v or window_beta is not aligned");

  using stochastic = writeback_policy<fp32_format, round_stochastic>;
  rejector<fixture<stochastic>>([](const gdn_params<float>& p) { return cpu::decode_step<writeback_policy<fp32_format, round_stochastic>>(p); })(
      [](fixture<stochastic>& f) { f.p.cursors = nullptr; }, "stochastic rounding needs cursors");

  // A cursor no step could have left: every head is skipped, nothing is written.
  rejects([](F& f) { for (auto& c : f.state.cursors) c.length = 9; }, "a window cursor held a length or ring start");
}

TEST_CASE("gdn: bad verify steps are rejected and never touch the checkpoint", "[gdn][validation][spec]") {
  using F = fixture<replay8>;
  auto rejects = rejector<F>(verify<replay8>, 3);
  rejector<F>([](const gdn_params<float>& p) { return validate_gdn<writeback32>(p, true, step_kind::verify); }, 3)(
      [](F&) {}, "the verify step needs a replay policy (drafts wait in the window)");
  rejector<F>(verify<replay_policy<2, fp32_format>>, 3)([](F&) {}, "tokens=3 drafts do not fit the window of 2");
  rejects([](F& f) { f.p.tokens = 0; }, "tokens=0 is outside [1, max_draft_tokens=8]");
  rejects([](F& f) { f.p.tokens = max_draft_tokens + 1; }, "tokens=9 is outside [1, max_draft_tokens=8]");
  rejects([](F& f) { f.p.window_entries = 10; },
          "window_entries=10 is too short for a verify step: it needs window + tokens = 11 ring entries");
  rejects([](F& f) { f.p.window_entries = 0; }, "window_entries=8 is too short for a verify step");
  rejects([](F& f) { f.p.token_counts = (f.counts = {3, 0}).data(); }, "token_counts[1]=0 is outside [1, tokens=3]");
  rejects([](F& f) { f.p.token_counts = (f.counts = {4, 1}).data(); }, "token_counts[0]=4 is outside [1, tokens=3]");
  rejects([](F& f) { f.p.token_counts = (f.counts = {-1, 1}).data(); }, "token_counts[0]=-1");
  rejects([](F& f) { f.p.cursors = nullptr; }, "replay needs cursors");
  rejects([](F& f) { f.slots[1] = 7; }, "slot_indices[1]=7");
  rejects([](F& f) { f.p.q = nullptr; }, "q is null");
  // A verify that fails on every head (cursors no step could have left) writes nothing.
  rejects([](F& f) { for (auto& c : f.state.cursors) c.start = 11; }, "a window cursor held a length or ring start");

  SECTION("drafts that are all rejected leave the checkpoint and committed lengths as they were") {
    F f(3);
    const auto checkpoint = f.state.checkpoint;
    const auto cursors = f.state.cursors;
    REQUIRE(cpu::verify_step<replay8>(f.p).ok());
    CHECK(bytes(f.state.checkpoint) == bytes(checkpoint));
    f.p.accepted_counts = (f.accepted = {0, 0}).data();
    REQUIRE(cpu::commit_drafts(f.p).ok());
    CHECK(bytes(f.state.checkpoint) == bytes(checkpoint));
    CHECK(bytes(f.state.cursors) == bytes(cursors));  // length 0, nothing pending
  }
}

TEST_CASE("gdn: bad commits are rejected and leave the cursors as they were", "[gdn][validation][spec]") {
  using F = fixture<replay8>;
  // Each case commits after a valid verify of 3 drafts per request.
  auto rejects = [](auto breaks, const std::string& says) {
    F f(3);
    REQUIRE(cpu::verify_step<replay8>(f.p).ok());
    f.p.accepted_counts = (f.accepted = {2, 1}).data();
    breaks(f);
    CHECK_THAT(f.error(commit), contains_text(says));
  };
  rejects([](F& f) { f.p.cursors = nullptr; }, "commit: cursors are null");
  rejects([](F& f) { f.p.accepted_counts = nullptr; }, "commit: accepted_counts are null");
  rejects([](F& f) { f.accepted = {4, 0}; }, "commit: accepted_counts[0]=4 is outside [0, 3]");
  rejects([](F& f) { f.accepted = {0, -1}; }, "commit: accepted_counts[1]=-1 is outside [0, 3]");
  rejects([](F& f) { f.p.token_counts = (f.counts = {3, 2}).data(), f.accepted = {0, 3}; },
          "commit: accepted_counts[1]=3 is outside [0, 2]");
  rejects([](F& f) { f.p.batch = -1; }, "commit: batch, heads and num_slots must be valid (batch=-1");
  rejects([](F& f) { f.p.heads = 0; }, "heads=0");
  rejects([](F& f) { f.p.num_slots = 0; }, "num_slots=0");
  rejects([](F& f) { f.slots[1] = 3; }, "commit: slot_indices[1]=3 is outside [0, 3)");
  rejects([](F& f) { f.p.pad_slot_id = 0; }, "commit: pad_slot_id=0 names a real slot");
  rejects([](F& f) { f.p.token_counts = (f.counts = {4, 1}).data(); }, "commit: token_counts[0]=4 is outside [1, tokens=3]");
  rejects([](F& f) { f.p.slot_indices = nullptr, f.p.batch = 4; }, "batch=4 exceeds num_slots=3");
  // Beyond the cursors' pending drafts: a second commit of the same verify, or one with no verify.
  rejects([](F& f) { REQUIRE(cpu::commit_drafts(f.p).ok()); }, "commit: request 0: a commit accepted more drafts than were verified (or fewer than 0); nothing was committed");
  {
    F f(3);  // no verify step: nothing pending
    f.p.accepted_counts = (f.accepted = {1, 1}).data();
    CHECK_THAT(f.error(commit), contains_text("a commit accepted more drafts than were verified"));
  }
  SECTION("a valid commit moves only the committed lengths") {
    F f(3);
    REQUIRE(cpu::verify_step<replay8>(f.p).ok());
    f.p.accepted_counts = (f.accepted = {2, 1}).data();
    REQUIRE(cpu::commit_drafts(f.p).ok());
    for (int h = 0; h < 4; ++h) {
      CHECK(f.state.cursors[size_t(2 * 4 + h)].length == 2);
      CHECK(f.state.cursors[size_t(0 * 4 + h)].length == 1);
      CHECK(f.state.cursors[size_t(1 * 4 + h)].length == 0);
    }
  }
}

TEST_CASE("gdn: bad snapshot verify steps and commits are rejected", "[gdn][validation][spec]") {
  using F = fixture<writeback32>;
  // Two drafts per request on slots {2, 0} of 6; draft snapshots in slots 1, 3, 4, 5.
  auto rejects = [](auto step, auto breaks, const std::string& says) {
    F f(2, 6);
    f.p.snapshot_slots = (f.snapshots = {1, 3, 4, 5}).data();
    f.p.accepted_counts = (f.accepted = {2, 0}).data();
    breaks(f);
    CHECK_THAT(f.error(step), contains_text(says));
  };
  rejects(snapshot_verify, [](F& f) { f.p.tokens = 0; }, "snapshot: tokens=0 is outside [1, max_draft_tokens=8]");
  rejects(snapshot_verify, [](F& f) { f.p.tokens = 9; }, "snapshot: tokens=9 is outside");
  rejects(snapshot_verify, [](F& f) { f.p.snapshot_slots = nullptr; }, "snapshot: snapshot_slots are null");
  rejects(snapshot_verify, [](F& f) { f.snapshots[3] = 6; }, "snapshot: snapshot_slots[3]=6 is outside [0, 6)");
  rejects(snapshot_verify, [](F& f) { f.snapshots[0] = -1; }, "snapshot: snapshot_slots[0]=-1");
  rejects(snapshot_verify, [](F& f) { f.p.token_counts = (f.counts = {2, 3}).data(); },
          "snapshot: token_counts[1]=3 is outside [1, tokens=2]");
  rejects(snapshot_verify, [](F& f) { f.slots[1] = 6; }, "slot_indices[1]=6 is outside [0, 6)");
  rejects(snapshot_verify, [](F& f) { f.p.k = nullptr; }, "gated_deltanet: k is null");

  const auto snapshot_commit = [](const gdn_params<float>& p) {
    return cpu::snapshot_commit(p, const_cast<int32_t*>(p.slot_indices), const_cast<int32_t*>(p.snapshot_slots));
  };
  const std::string unset = "snapshot commit: slot_indices, snapshot_slots and accepted_counts must be set";
  rejects(snapshot_commit, [](F& f) { f.p.slot_indices = nullptr; }, unset);
  rejects(snapshot_commit, [](F& f) { f.p.snapshot_slots = nullptr; }, unset);
  rejects(snapshot_commit, [](F& f) { f.p.accepted_counts = nullptr; }, unset);
  rejects(snapshot_commit, [](F& f) { f.accepted = {3, 0}; }, "snapshot commit: accepted_counts[0]=3 is outside [0, 2]");
  rejects(snapshot_commit, [](F& f) { f.accepted = {0, -1}; }, "snapshot commit: accepted_counts[1]=-1");
  rejects(snapshot_commit, [](F& f) { f.p.token_counts = (f.counts = {2, 1}).data(), f.accepted = {0, 2}; },
          "snapshot commit: accepted_counts[1]=2 is outside [0, 1]");

  SECTION("a valid snapshot commit swaps the slots") {
    F f(2, 6);
    f.p.snapshot_slots = (f.snapshots = {1, 3, 4, 5}).data();
    f.p.accepted_counts = (f.accepted = {2, 0}).data();
    REQUIRE(cpu::verify_step<writeback_policy<fp32_format>>(f.p).ok());
    REQUIRE(cpu::snapshot_commit(f.p, f.slots.data(), f.snapshots.data()).ok());
    CHECK(f.slots == std::vector<int32_t>{3, 0});
    CHECK(f.snapshots == std::vector<int32_t>{1, 2, 4, 5});
  }
}

// snapshot_commit_request indexes snapshot_slots[b * tokens + accepted - 1]: a token count
// beyond tokens would reach past request b's row. The array is padded so that a stray write
// would stay inside the vector and show.
TEST_CASE("gdn: a snapshot commit with token_counts beyond tokens is rejected", "[gdn][validation][spec]") {
  fixture<writeback32> f(2, 6);
  f.snapshots = {1, 3, 4, 5, -7, -7, -7, -7};  // [batch][tokens] = 4 entries, then padding
  f.p.snapshot_slots = f.snapshots.data();
  f.p.token_counts = (f.counts = {2, 5}).data();
  f.p.accepted_counts = (f.accepted = {0, 5}).data();
  const status s = cpu::snapshot_commit(f.p, f.slots.data(), f.snapshots.data());
  CHECK_FALSE(s.ok());
  CHECK(f.snapshots == std::vector<int32_t>{1, 3, 4, 5, -7, -7, -7, -7});  // entry 6 = 1 * 2 + 5 - 1 untouched
  CHECK(f.slots == std::vector<int32_t>{2, 0});
}
