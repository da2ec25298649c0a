// SPDX-License-Identifier: Apache-2.0
// The Gated DeltaNet CUDA decode steps: against the float64 reference over many windows,
// bit for bit against the CPU path, and device-side error reporting.
#include "device_runner.cuh"

using namespace replayssm;
using namespace replayssm_test;

TEST_CASE("gpu gdn writeback and replay match the reference over many windows", "[gpu][gdn][decode]") {
  const gdn_case c{gdn_odd_shape, 3, 5, 11};
  for (const auto& e : {gpu_gdn_scenario<writeback_policy<fp32_format>, float>(c, 24, false),
                        gpu_gdn_scenario<replay_policy<8, fp32_format>, float>(c, 6 * 8, false),
                        gpu_gdn_scenario<gdn_policy<replay_policy<8, fp32_format>, gdn_window::raw_inputs>, float>(
                            c, 6 * 8, false)}) {
    CHECK(e.output < 1e-5);
    CHECK(e.checkpoint < 1e-5);
  }
  CHECK(gpu_gdn_scenario<replay_policy<16, fp32_format>, float>(c, 3 * 16 + 5, true).output < 1e-5);
}

TEST_CASE("gpu gdn replay on the Qwen3.5 shapes", "[gpu][gdn][decode][model]") {
  for (const auto& shape : {qwen35_4b, qwen35_122b}) {
    const auto e = gpu_gdn_scenario<replay_policy<16, fp32_format>, bfloat16_t>({shape, 4, 9, 5}, 3 * 16, false);
    CHECK(e.output < output_tolerance<bfloat16_t>());
    CHECK(e.checkpoint < 1e-5);
  }
}

TEST_CASE("gpu and cpu gdn steps are bit-identical", "[gpu][gdn][decode]") {
  const gdn_case c{qwen35_4b, 3, 5, 17};
  require_bit_identical<gdn_harness, writeback_policy<fp32_format>, bfloat16_t>(c, 3);
  require_bit_identical<gdn_harness, replay_policy<16, fp32_format>, bfloat16_t>(c, 20);
  require_bit_identical<
      gdn_harness, gdn_policy<replay_policy<8, bf16_format, fp32_format, round_stochastic>, gdn_window::raw_inputs>,
      bfloat16_t>(c, 20);
  require_bit_identical<gdn_harness, replay_policy<8, nvfp4_format, fp16_format, round_stochastic>, bfloat16_t>(
      {gdn_odd_shape, 3, 5, 19}, 20);
}

TEST_CASE("the gdn warp read step matches the CPU in every read format and copy engine", "[gpu][gdn][decode]") {
  // The Qwen3.5 shape reads on the warp step, and flushes there too in the corrected_values
  // mode (writing the read copy of the split modes); phases differ per slot, so reads and
  // flushes mix.
  const gdn_case c{qwen35_4b, 5, 7, 29};
  require_bit_identical<gdn_harness, replay_policy<8, nvfp4_format, fp16_format, round_stochastic>, bfloat16_t>(c, 20);
  require_bit_identical<gdn_harness, replay_policy<8, fp8_e4m3_format, fp16_format, round_stochastic>, bfloat16_t>(
      c, 20);
  require_bit_identical<gdn_harness, replay_policy<4, fp16_format, fp32_format, round_stochastic>, float>(c, 12);
  using runner = device_recurrence<gdn_params<bfloat16_t>>;
  runner::lanes_copy_engine = true;
  require_bit_identical<gdn_harness, replay_policy<16, fp32_format>, bfloat16_t>(c, 20);
  require_bit_identical<gdn_harness, replay_policy<8, bf16_format, fp32_format, round_stochastic>, bfloat16_t>(c, 20);
  require_bit_identical<
      gdn_harness, gdn_policy<replay_policy<8, bf16_format, fp32_format, round_stochastic>, gdn_window::raw_inputs>,
      bfloat16_t>(c, 20);
  runner::lanes_copy_engine = false;
}

TEST_CASE("gpu gdn flushes and write-back steps match the CPU in every state format, window and mode",
          "[gpu][gdn][decode]") {
  // Stochastic rounding of a 16-bit state, the longest window (its flushes on the head step),
  // recomputed u (raw_inputs), and the odd shape's write-back.
  const gdn_case c{qwen35_4b, 5, 7, 37};
  require_bit_identical<gdn_harness, writeback_policy<bf16_format, round_stochastic>, bfloat16_t>(c, 4);
  require_bit_identical<gdn_harness, writeback_policy<fp16_format>, float>({gdn_odd_shape, 3, 5, 41}, 4);
  require_bit_identical<gdn_harness, replay_policy<max_window, fp32_format>, bfloat16_t>(c, 2 * max_window + 6);
  require_bit_identical<gdn_harness, gdn_policy<replay_policy<8, fp32_format>, gdn_window::raw_inputs>, float>(c, 36);
}

TEST_CASE("gpu gdn replay on the Qwen3.5 shape with staggered phases", "[gpu][gdn][decode][model]") {
  // Outputs only: with staggered phases the checkpoints hold different steps per slot (the
  // bit-identity tests compare them with the CPU's).
  CHECK(gpu_gdn_scenario<replay_policy<16, fp32_format>, float>({qwen35_4b, 7, 9, 31}, 4 * 16 + 3, true).output < 1e-5);
}

TEST_CASE("the device reports bad gdn slots and cursors and skips their requests", "[gpu][gdn][validation]") {
  require_device_skips_bad_rows<gdn_harness, replay_policy<8, fp32_format>>({gdn_odd_shape, 2, 3, 5}, true);
}
