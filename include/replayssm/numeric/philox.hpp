// SPDX-License-Identifier: Apache-2.0
/// \file philox.hpp
/// The counter-based generator behind stochastic rounding. Philox-4x32 with 10
/// rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), and the
/// stream of random words the library draws from it, keyed by what is being rounded so
/// that the bits never depend on launch geometry.
#pragma once

#include <cstdint>

#include "replayssm/config.hpp"

namespace replayssm {

/// Four 32-bit words: a Philox counter or output block.
struct uint32x4 {
  uint32_t x, y, z, w;
};

namespace detail {

/// High 32 bits of the 64-bit product a * b.
REPLAYSSM_HOST_DEVICE uint32_t mul_hi32(uint32_t a, uint32_t b) {
#if REPLAYSSM_DEVICE_PASS
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

}  // namespace detail

/// Philox-4x32-10: the Random123 block function with multipliers 0xD2511F53 and 0xCD9E8D57
/// and Weyl key increments 0x9E3779B9 and 0xBB67AE85. Reproduces Random123's published
/// known-answer vectors.
REPLAYSSM_HOST_DEVICE uint32x4 philox4x32_10(uint32x4 counter, uint32_t key0, uint32_t key1) {
  constexpr uint32_t multiplier0 = 0xD2511F53u;
  constexpr uint32_t multiplier1 = 0xCD9E8D57u;
  constexpr uint32_t weyl0 = 0x9E3779B9u;
  constexpr uint32_t weyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = detail::mul_hi32(multiplier0, counter.x);
    const uint32_t hi1 = detail::mul_hi32(multiplier1, counter.z);
    counter =
        uint32x4{hi1 ^ counter.y ^ key0, multiplier1 * counter.z, hi0 ^ counter.w ^ key1, multiplier0 * counter.x};
    key0 += weyl0;
    key1 += weyl1;
  }
  return counter;
}

/// Identifies one stream of random words: one head of one state slot at one flush.
struct random_stream_key {
  uint64_t seed;
  uint32_t slot;
  uint32_t head;
  uint32_t flush_index;
};

namespace detail {

/// Block `block` of a stream: words 4 block .. 4 block + 3.
REPLAYSSM_HOST_DEVICE uint32x4 stream_block(const random_stream_key& key, uint32_t block) {
  return philox4x32_10(uint32x4{block, key.head, key.slot, key.flush_index}, static_cast<uint32_t>(key.seed),
                       static_cast<uint32_t>(key.seed >> 32));
}

/// Component `i` (0..3) of a block. A select chain, not an index, so a runtime `i` keeps
/// the block in registers on the device.
REPLAYSSM_HOST_DEVICE uint32_t block_word(const uint32x4& block, uint32_t i) {
  return i == 0 ? block.x : i == 1 ? block.y : i == 2 ? block.z : block.w;
}

}  // namespace detail

/// Writes words first_word .. first_word + Count - 1 of the stream `key` to `out`.
/// Word w of the stream is philox4x32_10({uint32(w/4), head, slot, flush_index},
/// uint32(seed), uint32(seed>>32)) component w%4, so any split of a range into calls gives
/// the same words. Each Philox block is computed once per call. Word indices wrap at 2^32.
template <int Count>
REPLAYSSM_HOST_DEVICE void random_words(const random_stream_key& key, uint32_t first_word, uint32_t (&out)[Count]) {
  static_assert(Count > 0, "random_words: Count must be positive");
  uint32_t block_index = first_word / 4;
  uint32x4 block = detail::stream_block(key, block_index);
  for (int i = 0; i < Count; ++i) {
    const uint32_t word = first_word + static_cast<uint32_t>(i);
    if (word / 4 != block_index) {
      block_index = word / 4;
      block = detail::stream_block(key, block_index);
    }
    out[i] = detail::block_word(block, word % 4);
  }
}

}  // namespace replayssm
