// SPDX-License-Identifier: Apache-2.0
// A request's checks split into shares, as the device splits them over a warp's lanes or a
// block's threads (`check_request_share` of the requests and heads first, first + stride,
// ...), against a direct reference: the union of every share is the request's duplicate
// slots and its heads' plans, whatever the batch, heads and stride, wherever the broken
// slot or cursor lies.
#include "../support/catch.hpp"

#include <algorithm>
#include <random>
#include <vector>

#include "replayssm/mamba2.hpp"

using namespace replayssm;

namespace {

using policy = replay_policy<8, fp32_format>;

/// A request's checks as written from their definition, for the cursors this test makes
/// (a flush done, start 0): another request of the step in its slot; a head whose window
/// holds more than W entries is out of range; one whose decode token fills the window
/// (W - 1 entries held) flushes, the others read.
request_share expected_share(const mamba2_params<float>& p, int32_t b) {
  const int32_t slot = p.slot_indices[b];
  request_share r{step_ok, false, false};
  for (int32_t other = 0; other < p.batch; ++other)
    if (other != b && p.slot_indices[other] == slot) r.errors = error_duplicate_slot;
  for (int32_t h = 0; h < p.heads; ++h) {
    const int32_t length = p.cursors[int64_t(slot) * p.heads + h].length;
    if (length > policy::window)
      r.errors |= error_cursor_out_of_range;
    else if (length == policy::window - 1)
      r.flushes = true;
    else
      r.reads = true;
  }
  return r;
}

}  // namespace

TEST_CASE("a request's checks split into shares unite to the whole check", "[requests]") {
  std::mt19937_64 rng(20261206);
  auto uniform = [&rng](int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 400; ++trial) {
    const int32_t batch = uniform(1, 70), heads = uniform(1, 100), num_slots = batch + uniform(0, 8);
    std::vector<int32_t> slots(static_cast<size_t>(num_slots));
    for (int32_t i = 0; i < num_slots; ++i) slots[size_t(i)] = i;
    std::shuffle(slots.begin(), slots.end(), rng);
    slots.resize(size_t(batch));
    std::vector<int32_t> phase(static_cast<size_t>(num_slots));
    for (int32_t& f : phase) f = uniform(0, policy::window - 1);
    std::vector<replay_cursor> cursors(static_cast<size_t>(num_slots) * static_cast<size_t>(heads));
    for (int32_t s = 0; s < num_slots; ++s) {  // every head of a slot at the same length
      const int32_t length = uniform(0, policy::window - 1 - phase[size_t(s)]);
      for (int32_t h = 0; h < heads; ++h) cursors[size_t(s) * heads + h] = replay_cursor{length, 1u, 0, 0};
    }
    const int broken = uniform(0, 3);  // none, a shared slot, a cursor out of range, one head flushing alone
    const int32_t b0 = uniform(0, batch - 1), b1 = uniform(0, batch - 1), head = uniform(0, heads - 1);
    if (broken == 1) slots[size_t(b1)] = slots[size_t(b0)];
    if (broken == 2) cursors[size_t(slots[size_t(b0)]) * heads + head].length = policy::window + uniform(1, 5);
    if (broken == 3) cursors[size_t(slots[size_t(b0)]) * heads + head].length = policy::window - 1;

    mamba2_params<float> p = contiguous_mamba2_params<float>({heads, 16, 16, 1}, batch);
    p.num_slots = num_slots;
    p.slot_indices = slots.data();
    p.flush_phase = phase.data();
    p.cursors = cursors.data();
    p.window_entries = policy::window;
    for (const int32_t stride : {1, 3, 4, 32, 320}) {
      INFO("trial " << trial << ", batch " << batch << ", heads " << heads << ", stride " << stride);
      for (int32_t b = 0; b < batch; ++b) {
        request_share all{step_ok, false, false};
        for (int32_t first = 0; first < stride; ++first) {
          const request_share share = check_request_share<policy, step_kind::decode>(p, b, first, stride);
          all = {all.errors | share.errors, all.flushes || share.flushes, all.reads || share.reads};
        }
        const request_share expected = expected_share(p, b);
        CHECK(all.errors == expected.errors);
        CHECK(all.flushes == expected.flushes);
        CHECK(all.reads == expected.reads);
      }
    }
  }
}
