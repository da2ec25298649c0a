// SPDX-License-Identifier: Apache-2.0
// Philox-4x32-10 against Random123's known answers, and the random-word stream's
// independence from how it is called.
#include "../support/catch.hpp"
#include <cstdint>
#include <vector>

#include "replayssm/numeric/philox.hpp"

using replayssm::philox4x32_10;
using replayssm::random_stream_key;
using replayssm::random_words;
using replayssm::uint32x4;

namespace {

void require_block(const uint32x4& got, const uint32x4& want) {
  CHECK(got.x == want.x);
  CHECK(got.y == want.y);
  CHECK(got.z == want.z);
  CHECK(got.w == want.w);
}

// Word w of the stream, straight from its definition.
uint32_t defined_word(const random_stream_key& key, uint32_t w) {
  const uint32x4 block =
      philox4x32_10({w / 4, key.head, key.slot, key.flush_index}, static_cast<uint32_t>(key.seed),
                    static_cast<uint32_t>(key.seed >> 32));
  const uint32_t words[4] = {block.x, block.y, block.z, block.w};
  return words[w % 4];
}

template <int Count>
std::vector<uint32_t> draw(const random_stream_key& key, uint32_t first) {
  uint32_t out[Count];
  random_words(key, first, out);
  return std::vector<uint32_t>(out, out + Count);
}

}  // namespace

TEST_CASE("philox4x32_10 reproduces the Random123 known-answer vectors", "[philox]") {
  // kat_vectors: "philox4x32 10 <counter x4> <key x2> <output x4>".
  require_block(philox4x32_10({0u, 0u, 0u, 0u}, 0u, 0u),
                {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  require_block(
      philox4x32_10({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, 0xffffffffu, 0xffffffffu),
      {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  require_block(
      philox4x32_10({0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, 0xa4093822u, 0x299f31d0u),
      {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST_CASE("random_words follows its definition for any offset", "[philox]") {
  const random_stream_key key{0x0123456789abcdefull, 7u, 3u, 11u};
  for (uint32_t first : {0u, 1u, 2u, 3u, 4u, 5u, 13u, 1000u, 0x7ffffffeu, 0xfffffff0u}) {
    const std::vector<uint32_t> words = draw<9>(key, first);
    for (uint32_t i = 0; i < 9; ++i) CHECK(words[i] == defined_word(key, first + i));
  }
}

TEST_CASE("random_words does not depend on how a range is split into calls", "[philox]") {
  const random_stream_key key{42u, 1u, 2u, 3u};
  const std::vector<uint32_t> whole = draw<64>(key, 100u);
  std::vector<uint32_t> by_ones, by_threes, by_fours;
  for (uint32_t w = 0; w < 64; ++w) by_ones.push_back(draw<1>(key, 100u + w)[0]);
  for (uint32_t w = 0; w + 3 <= 63; w += 3) {
    for (uint32_t v : draw<3>(key, 100u + w)) by_threes.push_back(v);
  }
  for (uint32_t w = 0; w < 64; w += 4) {
    for (uint32_t v : draw<4>(key, 100u + w)) by_fours.push_back(v);
  }
  CHECK(by_ones == whole);
  CHECK(by_fours == whole);
  CHECK(std::vector<uint32_t>(whole.begin(), whole.begin() + 63) == by_threes);
}

TEST_CASE("every field of the stream key selects a different stream", "[philox]") {
  const random_stream_key base{0x1111222233334444ull, 5u, 6u, 7u};
  const std::vector<uint32_t> reference = draw<8>(base, 0u);
  random_stream_key changed = base;
  changed.seed ^= 1ull << 40;  // the high half of the seed is the second key word
  CHECK(draw<8>(changed, 0u) != reference);
  changed = base;
  changed.slot += 1;
  CHECK(draw<8>(changed, 0u) != reference);
  changed = base;
  changed.head += 1;
  CHECK(draw<8>(changed, 0u) != reference);
  changed = base;
  changed.flush_index += 1;
  CHECK(draw<8>(changed, 0u) != reference);
  CHECK(draw<8>(base, 0u) == reference);
}
