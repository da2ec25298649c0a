// SPDX-License-Identifier: Apache-2.0
// Device-side helpers of the GPU benchmarks: buffers, random state pools, the measured
// copy and read bandwidths, and timing with CUDA events and graphs.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#include <replayssm/kernels/cuda_decode.cuh>
#include <replayssm/replayssm.hpp>

namespace replayssm_bench {

using namespace replayssm;

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

/// An owned device allocation.
class device_buffer {
 public:
  device_buffer() = default;
  explicit device_buffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) cuda_check(cudaMalloc(&ptr_, bytes), "cudaMalloc");
  }
  device_buffer(device_buffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr; }
  device_buffer& operator=(device_buffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~device_buffer() { cudaFree(ptr_); }
  template <class T = void>
  T* get() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/// Fills `n` elements of type T with uniform values in [-scale, scale] from Philox.
template <class T>
__global__ void fill_uniform(T* out, size_t n, uint32_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint32x4 r = philox4x32_10({uint32_t(i), uint32_t(i >> 32), 0u, 0u}, seed, 0x5eedu);
    const float u = float(r.x >> 8) * (1.0f / 16777216.0f);
    out[i] = from_float<T>((2.0f * u - 1.0f) * scale);
  }
}

/// Fills a state pool in `Format` (fewer than 2^31 chunks) with values of magnitude about 1,
/// encoded by the format.
template <class Format>
__global__ void fill_state_pool(void* data, void* scales, size_t chunks, uint32_t seed) {
  const state_head_view<Format> pool = state_head_view<Format>::in_pool(data, scales, 0, 0);
  for (size_t c = blockIdx.x * size_t(blockDim.x) + threadIdx.x; c < chunks; c += size_t(gridDim.x) * blockDim.x) {
    float v[Format::chunk_elems];
    for (int e = 0; e < Format::chunk_elems; ++e) {
      const uint32x4 r = philox4x32_10({uint32_t(c), uint32_t(e), 1u, 0u}, seed, 0x5eedu);
      v[e] = float(r.x >> 8) * (2.0f / 16777216.0f) - 1.0f;
    }
    pool.template store<round_nearest_even>(int32_t(c), v, random_stream_key{});
  }
}

/// Bytes of a vectorized copy and a read-only stream, measured on this device.
struct device_bandwidth {
  double copy_gbs = 0;  ///< better of cudaMemcpy D2D and a float4 copy kernel, read + write counted
  double read_gbs = 0;  ///< a float4 read-only reduction
};

// Kernels of a header are templates, so that several translation units may include it.
template <class Vec>
__global__ void copy_kernel(const Vec* in, Vec* out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    out[i] = in[i];
}

template <class Vec>
__global__ void read_kernel(const Vec* in, size_t n, float* sink) {
  float acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const Vec v = in[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 1.2345f) *sink = acc;  // keeps the loads; never true on the random data
}

/// Median milliseconds of `reps` runs of `work` on the default stream, timed with events,
/// after one untimed warm-up run when `warm_up`.
template <class Work>
double median_ms(int reps, Work work, bool warm_up = true) {
  cudaEvent_t a, b;
  cuda_check(cudaEventCreate(&a), "event");
  cuda_check(cudaEventCreate(&b), "event");
  std::vector<double> ms;
  if (warm_up) work();
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(a);
    work();
    cudaEventRecord(b);
    cuda_check(cudaEventSynchronize(b), "sync");
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

/// Measured once per process, on 2 GiB buffers (far beyond the 60 MB L2).
inline const device_bandwidth& measured_bandwidth() {
  static const device_bandwidth bw = [] {
    const size_t bytes = size_t(2) << 30, n = bytes / 16;
    device_buffer in(bytes), out(bytes), sink(4);
    fill_uniform<float><<<1024, 256>>>(in.get<float>(), bytes / 4, 7, 1.0f);
    const double memcpy_ms = median_ms(10, [&] { cudaMemcpy(out.get(), in.get(), bytes, cudaMemcpyDeviceToDevice); });
    const double kernel_ms = median_ms(10, [&] { copy_kernel<float4><<<132 * 16, 256>>>(in.get<float4>(), out.get<float4>(), n); });
    const double read_ms = median_ms(10, [&] { read_kernel<float4><<<132 * 16, 256>>>(in.get<float4>(), n, sink.get<float>()); });
    device_bandwidth r;
    r.copy_gbs = 2.0 * bytes / (std::min(memcpy_ms, kernel_ms) * 1e6);
    r.read_gbs = double(bytes) / (read_ms * 1e6);
    return r;
  }();
  return bw;
}

}  // namespace replayssm_bench
