// SPDX-License-Identifier: Apache-2.0
// Policies: description text, shared/separate detection, the traffic model.
#include <replayssm/diagnostics/describe.hpp>
#include <replayssm/gated_deltanet/buffers.hpp>
#include <replayssm/mamba2/buffers.hpp>
#include <replayssm/policy/policy.hpp>
#include <replayssm/policy/traffic.hpp>

#include "../support/catch.hpp"

using namespace replayssm;

TEST_CASE("describe names the active mode", "[policy]") {
  CHECK(describe<replay_policy<16, nvfp4_format, fp16_format, round_stochastic>>() ==
        "replay W=16 read=nvfp4 checkpoint=fp16 rounding=stochastic(philox-10)");
  CHECK(describe<replay_policy<8, fp32_format>>() == "replay W=8 shared=fp32 rounding=nearest-even");
  CHECK(describe<writeback_policy<bf16_format>>() == "write-back state=bf16 rounding=nearest-even");
}

TEST_CASE("shared and write-back modes are derived from the parameters", "[policy]") {
  STATIC_REQUIRE(replay_policy<16, fp32_format>::shared_state);
  STATIC_REQUIRE_FALSE(replay_policy<16, fp16_format, fp32_format>::shared_state);
  STATIC_REQUIRE(writeback_policy<fp32_format>::is_writeback);
  STATIC_REQUIRE_FALSE(replay_policy<2, fp32_format>::is_writeback);
}

TEST_CASE("the traffic model follows the bytes each mode moves", "[policy]") {
  // Conventional FP32: read and write 4 bytes per element.
  CHECK(state_traffic_per_step<writeback_policy<fp32_format>>().total() == Approx(8.0));
  // Replay FP32 shared, W=16: read 4, write 4/16 (4.25 bytes per element).
  CHECK(state_traffic_per_step<replay_policy<16, fp32_format>>().total() == Approx(4.25));
  // FP16 read copy + FP32 checkpoint: the flush step reads the checkpoint instead of the
  // read copy, so 2 + (4 - 2)/16 read and (4 + 2)/16 written.
  const auto split = state_traffic_per_step<replay_policy<16, fp16_format, fp32_format>>();
  CHECK(split.read_bytes == Approx(2.125));
  CHECK(split.write_bytes == Approx(0.375));
  // NVFP4 read (0.5625 bytes) + FP16 checkpoint.
  CHECK(state_traffic_per_step<replay_policy<16, nvfp4_format, fp16_format>>().total() ==
        Approx(0.5625 + (2 - 0.5625) / 16 + (2 + 0.5625) / 16));
}

TEST_CASE("buffer sizes per request per layer", "[policy][memory]") {
  const mamba2_layer_shape nano{96, 80, 128, 8};
  const auto writeback = mamba2_buffers<writeback_policy<fp32_format>>(nano, 1, dtype::bf16);
  CHECK(writeback.checkpoint == size_t(96) * 80 * 128 * 4);
  CHECK(writeback.read_copy_total() == 0);
  CHECK(writeback.window_x == 0);
  const auto split = mamba2_buffers<replay_policy<16, nvfp4_format, fp16_format>>(nano, 1, dtype::bf16);
  CHECK(split.checkpoint == size_t(96) * 80 * 128 * 2);
  CHECK(split.read_copy == size_t(96) * 80 * 128 / 2);
  CHECK(split.read_copy_scales == size_t(96) * 80 * 128 / 16);
  CHECK(split.window_x == size_t(16) * 96 * 80 * 2);
  CHECK(split.window_B == size_t(16) * 8 * 128 * 2);
  CHECK(split.window_dt == size_t(16) * 96 * 4);
  // Replay moves fewer modelled bytes per step than write-back, activations included.
  CHECK(mamba2_bytes_per_step<replay_policy<16, fp32_format>>(nano, 256, dtype::bf16) <
        0.6 * mamba2_bytes_per_step<writeback_policy<fp32_format>>(nano, 256, dtype::bf16));
}
