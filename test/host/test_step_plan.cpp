// SPDX-License-Identifier: Apache-2.0
// The window bookkeeping of a decode step: when it flushes, what its flush folds, and the
// cursor it leaves, for a flush that folds its token (Mamba-2, write-back) and one that
// leaves it open (Gated DeltaNet replay).
#include "../support/catch.hpp"

#include <vector>

#include "replayssm/gated_deltanet.hpp"
#include "replayssm/mamba2.hpp"

using namespace replayssm;

namespace {

using policy = replay_policy<4, fp32_format>;

/// The tokens (1-based) at which a head of flush phase `phase` flushes over `tokens` decode
/// steps, checking each flush's fold and the cursor it leaves.
template <bool FoldsToken>
std::vector<int> flush_tokens(int32_t phase, int tokens) {
  replay_cursor cursor{};
  std::vector<int> flushes;
  for (int t = 1; t <= tokens; ++t) {
    const cursor_probe<policy, FoldsToken> probe{&cursor, phase, policy::window};
    const step_plan plan = plan_step<step_kind::decode>(probe, 1);
    REQUIRE(plan.error == step_ok);
    cursor = next_cursor(plan, step_kind::decode);
    if (!plan.writes_checkpoint) {
      CHECK(cursor.length == plan.length + 1);
      continue;
    }
    flushes.push_back(t);
    INFO("token " << t);
    CHECK(plan.folded == plan.length + (FoldsToken ? 1 : 0));
    CHECK(cursor.flush_count == uint32_t(flushes.size()));
    // A folded token empties the window; an open one is its first entry, where it was written.
    CHECK(cursor.length == (FoldsToken ? 0 : 1));
    CHECK(cursor.start == (FoldsToken ? 0 : plan.ring_slot(plan.length)));
  }
  return flushes;
}

}  // namespace

TEST_CASE("a decode step's flush folds its token or leaves it open to start the next window", "[replay][plan]") {
  STATIC_REQUIRE(flush_folds_token<mamba2_head_state<policy, float>>);
  STATIC_REQUIRE(!flush_folds_token<gdn_head_state<policy, float>>);
  STATIC_REQUIRE(flush_folds_token<gdn_head_state<writeback_policy<fp32_format>, float>>);
  STATIC_REQUIRE(gdn_flush_period<policy> == 3);
  // Every W tokens when the flush folds its token; after the first window, every W - 1 when
  // the token stays open. A phase shortens the first window only.
  CHECK(flush_tokens<true>(0, 12) == std::vector<int>{4, 8, 12});
  CHECK(flush_tokens<false>(0, 12) == std::vector<int>{4, 7, 10});
  CHECK(flush_tokens<true>(2, 12) == std::vector<int>{2, 6, 10});
  CHECK(flush_tokens<false>(2, 12) == std::vector<int>{2, 5, 8, 11});
}

TEST_CASE("a write-back cursor holding window entries is one no step leaves", "[replay][plan]") {
  // A write-back state keeps no window: its step's only entry is its token.
  using writeback = writeback_policy<fp32_format>;
  for (int32_t length : {0, 1}) {
    const replay_cursor cursor{length, 3u, 0, 0};
    const cursor_probe<writeback, true> probe{&cursor, 0, writeback::window};
    const step_plan plan = plan_step<step_kind::decode>(probe, 1);
    INFO("length " << length);
    CHECK(plan.error == (length == 0 ? uint32_t(step_ok) : uint32_t(error_cursor_out_of_range)));
    if (length == 0) CHECK((plan.writes_checkpoint && plan.folded == 1 && plan.flush_count == 3u));
  }
}
