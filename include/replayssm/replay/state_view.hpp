// SPDX-License-Identifier: Apache-2.0
/// \file state_view.hpp
/// One head's state in a storage format, read and written a chunk at a time.
///
/// A state pool holds, per slot and head, a `head_dim x state_dim` row-major matrix in a
/// state format (numeric/formats.hpp). Its data and its scales lie in two planes:
///
///     data   [slot][head][row][chunk]   Format::data_bytes_per_chunk bytes per chunk
///     scales [slot][head][row][chunk]   Format::scale_bytes_per_chunk bytes per chunk
#pragma once

#include <cstddef>
#include <cstdint>

#include "replayssm/config.hpp"
#include "replayssm/numeric/formats.hpp"
#include "replayssm/numeric/philox.hpp"

namespace replayssm {

/// Bytes of each plane of a state pool of `elements` elements (all slots, heads, rows).
template <class Format>
constexpr size_t state_data_bytes(size_t elements) {
  return elements / Format::chunk_elems * Format::data_bytes_per_chunk;
}
/// \copydoc state_data_bytes
template <class Format>
constexpr size_t state_scale_bytes(size_t elements) {
  return elements / Format::chunk_elems * Format::scale_bytes_per_chunk;
}

/// The stored bytes of one chunk, fetched ahead of their decode: a thread can then have many
/// chunks' loads in flight before it spends registers on their decoded values. Each plane is
/// aligned at least as in memory (to its size's power-of-two factor, up to 16 bytes), so a
/// format's vector loads of it stay valid.
template <class Format>
struct stored_chunk {
  static constexpr int scale_bytes = Format::scale_bytes_per_chunk > 0 ? Format::scale_bytes_per_chunk : 1;
  alignas(16) uint8_t data[Format::data_bytes_per_chunk];
  alignas(scale_bytes % 16 == 0 ? 16 : (scale_bytes % 8 == 0 ? 8 : 4)) uint8_t scales[scale_bytes];
};

namespace detail {

/// Copies `Bytes` bytes, both ends aligned to Bytes' largest power-of-two divisor up to 16,
/// in the widest vectors that alignment allows.
template <int Bytes>
REPLAYSSM_HOST_DEVICE void copy_chunk_bytes(uint8_t* to, const uint8_t* from) {
  constexpr int width = Bytes % 16 == 0 ? 16 : Bytes % 8 == 0 ? 8 : Bytes % 4 == 0 ? 4 : 1;
  if constexpr (width == 1) {
    for (int i = 0; i < Bytes; ++i) to[i] = from[i];
  } else {
    REPLAYSSM_UNROLL
    for (int i = 0; i < Bytes; i += width) {
      uint32_t words[width / 4];
      load_words(from + i, words);
      store_words(to + i, words);
    }
  }
}

}  // namespace detail

/// One head's state in `Format`: chunk i covers elements [i K, i K + K) of the row-major
/// matrix, K = Format::chunk_elems.
template <class Format>
struct state_head_view {
  static constexpr int chunk_elems = Format::chunk_elems;
  uint8_t* data = nullptr;
  uint8_t* scales = nullptr;

  /// The view of head `head_index` (= slot * heads + head) in a pool with
  /// `elements_per_head` elements per head.
  REPLAYSSM_HOST_DEVICE static state_head_view in_pool(void* data, void* scales, int64_t head_index,
                                                       int64_t elements_per_head) {
    const int64_t chunk0 = head_index * (elements_per_head / chunk_elems);
    state_head_view view;
    view.data = static_cast<uint8_t*>(data) + chunk0 * Format::data_bytes_per_chunk;
    view.scales = scales == nullptr ? nullptr : static_cast<uint8_t*>(scales) + chunk0 * Format::scale_bytes_per_chunk;
    return view;
  }

  /// The stored bytes of chunk `chunk`, to `decode` later.
  REPLAYSSM_HOST_DEVICE stored_chunk<Format> fetch(int32_t chunk) const {
    stored_chunk<Format> c;
    detail::copy_chunk_bytes<Format::data_bytes_per_chunk>(c.data,
                                                           data + int64_t(chunk) * Format::data_bytes_per_chunk);
    if constexpr (Format::scale_bytes_per_chunk > 0)
      detail::copy_chunk_bytes<Format::scale_bytes_per_chunk>(c.scales,
                                                              scales + int64_t(chunk) * Format::scale_bytes_per_chunk);
    return c;
  }

  /// Decodes a fetched chunk to floats.
  REPLAYSSM_HOST_DEVICE static void decode(const stored_chunk<Format>& c, float (&out)[chunk_elems]) {
    Format::decode(c.data, c.scales, out);
  }

  /// Decodes chunk `chunk` to floats.
  REPLAYSSM_HOST_DEVICE void load(int32_t chunk, float (&out)[chunk_elems]) const { decode(fetch(chunk), out); }

  /// Encodes chunk `chunk` with `Round`; stochastic rounding draws the chunk's words of the
  /// stream `key`, starting at word `chunk * random_words_per_chunk`, so the bits depend on
  /// the element, never on which thread writes it.
  template <class Round>
  REPLAYSSM_HOST_DEVICE void store(int32_t chunk, const float (&in)[chunk_elems], const random_stream_key& key) const {
    uint32_t bits[random_words_per_chunk];
    draw_bits<Round>(chunk, key, bits);
    Format::template encode<Round>(in, bits, data + int64_t(chunk) * Format::data_bytes_per_chunk,
                                   scales + int64_t(chunk) * Format::scale_bytes_per_chunk);
  }

  /// `store`, then `in` holds the values as stored (what a later `load` decodes): for a step
  /// that goes on from the state it has just written, as the next draft of the snapshot
  /// baseline does, without reading it back.
  template <class Round>
  REPLAYSSM_HOST_DEVICE void store_rounded(int32_t chunk, float (&in)[chunk_elems], const random_stream_key& key) const {
    uint32_t bits[random_words_per_chunk];
    draw_bits<Round>(chunk, key, bits);
    stored_chunk<Format> c;
    Format::template encode<Round>(in, bits, c.data, c.scales);
    detail::copy_chunk_bytes<Format::data_bytes_per_chunk>(data + int64_t(chunk) * Format::data_bytes_per_chunk, c.data);
    if constexpr (Format::scale_bytes_per_chunk > 0)
      detail::copy_chunk_bytes<Format::scale_bytes_per_chunk>(scales + int64_t(chunk) * Format::scale_bytes_per_chunk,
                                                              c.scales);
    decode(c, in);
  }

 private:
  static constexpr int random_words_per_chunk = Format::random_words_per_chunk > 0 ? Format::random_words_per_chunk : 1;
  /// The random words of chunk `chunk` that `Round` needs (zeros for rounding to nearest).
  template <class Round>
  REPLAYSSM_HOST_DEVICE static void draw_bits(int32_t chunk, const random_stream_key& key,
                                              uint32_t (&bits)[random_words_per_chunk]) {
    for (uint32_t& b : bits) b = 0u;
    // An exact format's encode is the identity: its words would be drawn for nothing.
    if constexpr (Round::is_stochastic && Format::random_words_per_chunk > 0 && !Format::is_exact_fp32)
      random_words(key, uint32_t(chunk) * Format::random_words_per_chunk, bits);
  }
};

}  // namespace replayssm
