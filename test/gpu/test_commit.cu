// SPDX-License-Identifier: Apache-2.0
// The device commit (`replayssm::cuda::commit_drafts`, shared by every recurrence) against what its
// documentation says, worked out here head by head: each request commits its accepted
// drafts at every head or, where anything about it is wrong, at none, and the lowest such
// request is reported. More heads than a warp has lanes, permuted slots, pad rows, and
// requests with a bad slot, a duplicated slot and an acceptance past one head's drafts.
#include "device_runner.cuh"

using namespace replayssm;
using namespace replayssm_test;

namespace {

struct commit_case {
  int32_t batch, heads, num_slots;
  std::vector<int32_t> slots, accepted;
  std::vector<replay_cursor> cursors;  ///< [slot][head]
};

/// A batch over a random permutation of the slots, every head of a request with drafts
/// pending, then the faults: request 3 padding, 5 a slot outside the pool, 8 and 11 the same
/// slot, 14 accepting one draft more than its head 37 verified.
commit_case make_case(std::mt19937& rng) {
  commit_case c{24, 70, 48, {}, {}, {}};
  std::vector<int32_t> order(size_t(c.num_slots));
  for (int32_t s = 0; s < c.num_slots; ++s) order[size_t(s)] = s;
  std::shuffle(order.begin(), order.end(), rng);
  c.slots.assign(order.begin(), order.begin() + c.batch);
  c.cursors.resize(size_t(c.num_slots) * c.heads);
  std::uniform_int_distribution<int32_t> length(0, 12), drafts(1, 4);
  for (auto& cursor : c.cursors) cursor = replay_cursor{length(rng), uint32_t(length(rng)), length(rng), drafts(rng)};
  for (int32_t b = 0; b < c.batch; ++b) {
    int32_t fewest = 4;
    for (int32_t h = 0; h < c.heads; ++h)
      fewest = std::min(fewest, c.cursors[size_t(c.slots[size_t(b)]) * c.heads + h].pending);
    c.accepted.push_back(std::uniform_int_distribution<int32_t>(0, fewest)(rng));
  }
  c.slots[3] = -1;
  c.slots[5] = c.num_slots + 2;
  c.slots[11] = c.slots[8];
  replay_cursor& short_head = c.cursors[size_t(c.slots[14]) * c.heads + 37];
  c.accepted[14] = short_head.pending + 1;
  return c;
}

/// The cursors after the commit, as documented, and the lowest request with an error.
std::vector<replay_cursor> expected_cursors(const commit_case& c, int32_t& first_error) {
  std::vector<replay_cursor> after = c.cursors;
  first_error = -1;
  for (int32_t b = 0; b < c.batch; ++b) {
    const int32_t slot = c.slots[size_t(b)];
    if (slot == -1) continue;
    bool ok = slot >= 0 && slot < c.num_slots && std::count(c.slots.begin(), c.slots.end(), slot) == 1;
    for (int32_t h = 0; ok && h < c.heads; ++h)
      ok = c.accepted[size_t(b)] <= c.cursors[size_t(slot) * c.heads + h].pending;
    if (!ok) {
      if (first_error < 0) first_error = b;
      continue;
    }
    for (int32_t h = 0; h < c.heads; ++h) {
      replay_cursor& cursor = after[size_t(slot) * c.heads + h];
      cursor.length += c.accepted[size_t(b)];
      cursor.pending = 0;
    }
  }
  return after;
}

}  // namespace

TEST_CASE("gpu commit moves every head of a request or none, and reports the first bad request", "[gpu][commit]") {
  std::mt19937 rng(2026);
  for (int trial = 0; trial < 4; ++trial) {
    const commit_case c = make_case(rng);
    int32_t first_error = -1;
    const std::vector<replay_cursor> expected = expected_cursors(c, first_error);
    REQUIRE(first_error == 5);

    std::vector<replay_cursor> cursors = c.cursors;
    device_copy slots(c.slots.data(), c.slots.size() * sizeof(int32_t));
    device_copy accepted(c.accepted.data(), c.accepted.size() * sizeof(int32_t));
    device_copy device_cursors(cursors.data(), cursors.size() * sizeof(replay_cursor));
    const step_report no_errors{};
    device_copy report(&no_errors, sizeof no_errors);
    mamba2_params<float> p;
    p.batch = c.batch;
    p.heads = c.heads;
    p.num_slots = c.num_slots;
    p.tokens = 4;
    p.pad_slot_id = -1;
    p.slot_indices = slots.get<int32_t>();
    p.accepted_counts = accepted.get<int32_t>();
    p.cursors = device_cursors.get<replay_cursor>();
    p.report = report.get<step_report>();
    REQUIRE(replayssm::cuda::commit_drafts(p).ok());
    const status reported = replayssm::cuda::take_step_errors(p.report);
    device_cursors.download();

    REQUIRE_FALSE(reported.ok());
    CHECK(reported.message().find("request " + std::to_string(first_error) + ":") != std::string::npos);
    for (size_t i = 0; i < cursors.size(); ++i) {
      INFO("slot " << i / size_t(c.heads) << " head " << i % size_t(c.heads));
      REQUIRE(cursors[i].length == expected[i].length);
      REQUIRE(cursors[i].pending == expected[i].pending);
      REQUIRE(cursors[i].start == expected[i].start);
      REQUIRE(cursors[i].flush_count == expected[i].flush_count);
    }
  }
}
