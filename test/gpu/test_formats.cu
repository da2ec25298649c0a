// SPDX-License-Identifier: Apache-2.0
// The state formats on the device against the host, chunk by chunk: decodes of random bytes
// (NaN and infinity codes among them), as stored and as operands, and encodes of random
// values in both rounding modes, so that the device's own conversion paths (hardware
// conversions behind a test, packed encodes) are held to the host's bits directly, not only
// through the steps.
#include "device_runner.cuh"

#include <cmath>
#include <cstdint>
#include <cstring>

using namespace replayssm;
using namespace replayssm_test;

namespace {

constexpr int test_chunks = 1 << 14;

/// Chunk i: decode data/scales into `decoded` (and as operands, `decode_operands`, into
/// `operands`), encode `values` into `encoded` (and scales) with the random words `random`
/// under `Round`.
template <class Format, class Round>
__global__ void format_chunks_kernel(const uint8_t* data, const uint8_t* scales, float* decoded, float* operands,
                                     const float* values, const uint32_t* random, uint8_t* encoded,
                                     uint8_t* encoded_scales) {
  constexpr int K = Format::chunk_elems;
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= test_chunks) return;
  float out[K];
  Format::decode(data + i * Format::data_bytes_per_chunk, scales + i * Format::scale_bytes_per_chunk, out);
  for (int e = 0; e < K; ++e) decoded[i * K + e] = out[e];
  decode_operands<Format>(data + i * Format::data_bytes_per_chunk, scales + i * Format::scale_bytes_per_chunk, out);
  for (int e = 0; e < K; ++e) operands[i * K + e] = out[e];
  float in[K];
  for (int e = 0; e < K; ++e) in[e] = values[i * K + e];
  Format::template encode<Round>(in, random + i * Format::random_words_per_chunk,
                                 encoded + i * Format::data_bytes_per_chunk,
                                 encoded_scales + i * Format::scale_bytes_per_chunk);
}

/// Random values over many binades (subnormal ranges of every format included), with exact
/// ties of the narrow grids, zeros of both signs, and an infinity or a NaN (any sign and
/// payload) in some chunks.
std::vector<float> test_values(int elems, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
  std::uniform_int_distribution<int> exponent(-40, 12), kind(0, 99);
  std::vector<float> v(static_cast<size_t>(elems));
  for (float& x : v) {
    const int k = kind(rng);
    const float sign = (rng() & 1u) != 0 ? -1.0f : 1.0f;
    if (k < 3) {
      x = sign * 0.0f;
    } else if (k < 30) {  // a midpoint of a coarse grid: 1.25, 1.75, 2.5, 3.5, 5 ... times 2^e
      x = sign * std::ldexp(1.0f + float(1 + 2 * int(rng() % 4)) / 8.0f, exponent(rng) / 4);
    } else {
      x = sign * std::ldexp(mantissa(rng), exponent(rng));
    }
  }
  for (int i = 0; i < elems; i += 997) {  // an infinity, or a NaN of either sign with a random payload
    const uint32_t nan_bits = (rng() & 0x80000000u) | 0x7f800000u | (1u + rng() % 0x7fffffu);
    float nan;
    std::memcpy(&nan, &nan_bits, sizeof nan);
    v[size_t(i)] = (i / 997) % 2 == 0 ? INFINITY : nan;
  }
  return v;
}

bool same_float(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

template <class Format, class Round>
void check_format_on_device(uint32_t seed) {
  constexpr int K = Format::chunk_elems, D = Format::data_bytes_per_chunk, S = Format::scale_bytes_per_chunk;
  constexpr int R = Format::random_words_per_chunk;
  std::mt19937 rng(seed);
  std::vector<uint8_t> data(size_t(test_chunks) * D), scales(size_t(test_chunks) * S + 1);
  for (uint8_t& b : data) b = uint8_t(rng());
  for (uint8_t& b : scales) b = uint8_t(rng());
  if constexpr (S == 4) {  // fp32 scales: finite, mostly normal
    for (int i = 0; i < test_chunks; ++i) {
      const float s = std::ldexp(float(1 + rng() % 1000) / 1000.0f, int(rng() % 60) - 40);
      std::memcpy(&scales[size_t(i) * 4], &s, 4);
    }
  }
  const std::vector<float> values = test_values(test_chunks * K, seed + 1);
  std::vector<uint32_t> random(size_t(test_chunks) * R + 1);
  for (uint32_t& w : random) w = rng();

  std::vector<float> decoded(size_t(test_chunks) * K), operands(decoded.size());
  std::vector<uint8_t> encoded(data.size()), encoded_scales(scales.size());
  {
    device_copy d_data(data.data(), data.size()), d_scales(scales.data(), scales.size());
    device_copy d_values(values.data(), values.size() * 4), d_random(random.data(), random.size() * 4);
    device_copy d_decoded(decoded.data(), decoded.size() * 4), d_operands(operands.data(), operands.size() * 4);
    device_copy d_encoded(encoded.data(), encoded.size());
    device_copy d_encoded_scales(encoded_scales.data(), encoded_scales.size());
    format_chunks_kernel<Format, Round><<<(test_chunks + 127) / 128, 128>>>(
        d_data.get<uint8_t>(), d_scales.get<uint8_t>(), d_decoded.get<float>(), d_operands.get<float>(),
        d_values.get<float>(),
        d_random.get<uint32_t>(), d_encoded.get<uint8_t>(), d_encoded_scales.get<uint8_t>());
    REPLAYSSM_CUDA_CHECK(cudaDeviceSynchronize());
    REPLAYSSM_CUDA_CHECK(cudaMemcpy(decoded.data(), d_decoded.get<float>(), decoded.size() * 4, cudaMemcpyDeviceToHost));
    REPLAYSSM_CUDA_CHECK(
        cudaMemcpy(operands.data(), d_operands.get<float>(), operands.size() * 4, cudaMemcpyDeviceToHost));
    REPLAYSSM_CUDA_CHECK(cudaMemcpy(encoded.data(), d_encoded.get<uint8_t>(), encoded.size(), cudaMemcpyDeviceToHost));
    REPLAYSSM_CUDA_CHECK(cudaMemcpy(encoded_scales.data(), d_encoded_scales.get<uint8_t>(), encoded_scales.size(),
                                    cudaMemcpyDeviceToHost));
  }
  int decode_mismatches = 0, operand_mismatches = 0, encode_mismatches = 0, nans = 0;
  for (int i = 0; i < test_chunks; ++i) {
    float want[K];
    Format::decode(&data[size_t(i) * D], &scales[size_t(i) * S], want);
    for (int e = 0; e < K; ++e) {
      decode_mismatches += same_float(want[e], decoded[size_t(i) * K + e]) ? 0 : 1;
      operand_mismatches += same_float(want[e], operands[size_t(i) * K + e]) ? 0 : 1;  // NaN for NaN
      nans += std::isnan(want[e]) ? 1 : 0;
    }
    float in[K];
    for (int e = 0; e < K; ++e) in[e] = values[size_t(i) * K + e];
    uint8_t bytes[D], scale_bytes[S + 1];
    Format::template encode<Round>(in, &random[size_t(i) * R], bytes, scale_bytes);
    encode_mismatches += std::memcmp(bytes, &encoded[size_t(i) * D], D) != 0 ||
                                 std::memcmp(scale_bytes, &encoded_scales[size_t(i) * S], S) != 0
                             ? 1
                             : 0;
  }
  INFO(Format::name << (Round::is_stochastic ? ", stochastic" : ", nearest even"));
  CHECK(decode_mismatches == 0);
  CHECK(operand_mismatches == 0);
  // The random codes hold NaNs, so that a format's own operand decode is held on them.
  if constexpr (replayssm::detail::has_member<Format, replayssm::detail::decode_operands_t>::value) CHECK(nans > 0);
  CHECK(encode_mismatches == 0);
}

}  // namespace

TEST_CASE("every state format decodes and encodes on the device bit for bit as on the host", "[gpu][formats]") {
  check_format_on_device<fp32_format, round_nearest_even>(1);
  check_format_on_device<fp16_format, round_nearest_even>(2);
  check_format_on_device<fp16_format, round_stochastic>(3);
  check_format_on_device<bf16_format, round_nearest_even>(4);
  check_format_on_device<bf16_format, round_stochastic>(5);
  check_format_on_device<fp8_e4m3_format, round_nearest_even>(6);
  check_format_on_device<fp8_e4m3_format, round_stochastic>(7);
  check_format_on_device<nvfp4_format, round_nearest_even>(8);
  check_format_on_device<nvfp4_format, round_stochastic>(9);
}
