// SPDX-License-Identifier: Apache-2.0
// Must fail to compile, naming the missing member: a state format without encode.
#include <replayssm/policy/policy.hpp>

struct format_without_encode {
  static constexpr const char* name = "no_encode";
  static constexpr int chunk_elems = 4, block_elems = 1, data_bytes_per_chunk = 16, scale_bytes_per_chunk = 0,
                       random_words_per_chunk = 4;
  static constexpr double bytes_per_element = 4;
  static constexpr bool is_exact_fp32 = false;
  static void decode(const uint8_t*, const uint8_t*, float (&)[4]) {}
};

int main() { return replayssm::replay_policy<16, format_without_encode>::window; }
