// SPDX-License-Identifier: Apache-2.0
// Must fail to compile: a per-row int8 format of 128-element chunks would spill from
// registers in every kernel.
#include <replayssm/policy/policy.hpp>

struct int8_row_format {
  static constexpr const char* name = "int8_row";
  static constexpr int chunk_elems = 128, block_elems = 128, data_bytes_per_chunk = 128, scale_bytes_per_chunk = 4,
                       random_words_per_chunk = 32;
  static constexpr double bytes_per_element = 132.0 / 128;
  static constexpr bool is_exact_fp32 = false;
  static void decode(const uint8_t*, const uint8_t*, float (&)[128]) {}
  template <class Round>
  static void encode(const float (&)[128], const uint32_t*, uint8_t*, uint8_t*) {}
};

int main() { return replayssm::replay_policy<16, int8_row_format>::window; }
