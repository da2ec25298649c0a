// SPDX-License-Identifier: Apache-2.0
// What the decode-loop examples share: a backend that owns buffers in host or device memory
// and runs the library's steps (Mamba-2 or Gated DeltaNet) on the CPU or the GPU, the
// fixed-seed weights of a toy stack of recurrent layers, and the entry point (its command
// line: args.hpp).
#pragma once

#include <replayssm/replayssm.hpp>
#if REPLAYSSM_CUDA_COMPILER
#include <replayssm/cuda.cuh>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.hpp"

namespace replayssm_example {

using namespace replayssm;

#if REPLAYSSM_CUDA_COMPILER
template <class View, class Piece>
__global__ void rows_kernel(View v, int rows, Piece piece) {
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r < rows) piece(v, r);
}
#endif

/// The residual update after a layer: h = rmsnorm(h + y) over d values.
REPLAYSSM_HOST_DEVICE void add_and_rmsnorm(float* h, const float* y, int d) {
  double sum = 0;
  for (int i = 0; i < d; ++i) {
    h[i] += y[i];
    sum += double(h[i]) * h[i];
  }
  const float inv = float(1.0 / std::sqrt(sum / d + 1e-6));
  for (int i = 0; i < d; ++i) h[i] *= inv;
}

/// Where buffers live and how the steps run: host memory and the CPU path, or the GPU.
class backend {
 public:
  explicit backend(bool cuda) : cuda_(cuda) {
    if (cuda_) report_ = array<step_report>(1);
  }
  backend(const backend&) = delete;
  backend& operator=(const backend&) = delete;
  ~backend() {
    for (void* p : owned_) release(p);
  }

  /// A zeroed buffer of `bytes` bytes, 256-byte aligned.
  void* allocate(size_t bytes) {
    void* p = nullptr;
    bytes = std::max<size_t>(bytes, 1);
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) {
      check(cudaMalloc(&p, bytes), "cudaMalloc");
      owned_.push_back(p);
      check(cudaMemset(p, 0, bytes), "cudaMemset");
      return p;
    }
#endif
    p = ::operator new(bytes, std::align_val_t(256));
    owned_.push_back(p);
    std::memset(p, 0, bytes);
    return p;
  }
  template <class T>
  T* array(size_t n) {
    return static_cast<T*>(allocate(n * sizeof(T)));
  }
  template <class T>
  T* upload(const std::vector<T>& v) {
    T* p = array<T>(v.size());
    upload(p, v);
    return p;
  }
  template <class T>
  void upload(T* to, const std::vector<T>& v) const {
    copy(to, v.data(), v.size() * sizeof(T));
  }
  template <class T>
  std::vector<T> download(const T* p, size_t n) const {
    std::vector<T> v(n);
    copy(v.data(), p, n * sizeof(T));
    return v;
  }
  void copy(void* to, const void* from, size_t bytes) const {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) return check(cudaMemcpy(to, from, bytes, cudaMemcpyDefault), "cudaMemcpy");
#endif
    std::memcpy(to, from, bytes);
  }

  /// Runs `piece(view, r)` for every row r (one per request, or per draft).
  template <class View, class Piece>
  void for_each_row(const View& v, int rows, Piece piece) const {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) {
      rows_kernel<<<(rows + 63) / 64, 64>>>(v, rows, piece);
      return check(cudaGetLastError(), "per-row kernel");
    }
#endif
    for (int r = 0; r < rows; ++r) piece(v, r);
  }

  // The library's steps, for any recurrence's params and any policy. They return a status;
  // an error becomes an exception here.

  /// One decode step: the conventional write-back step for a write-back policy, else replay.
  template <class Policy, class Params>
  void decode_step(const Params& p) const {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) return replayssm::cuda::decode_step<Policy>(p).throw_if_error();
#endif
    cpu::decode_step<Policy>(p).throw_if_error();
  }
  template <class Policy, class Params>
  void verify_step(const Params& p) const {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) return replayssm::cuda::verify_step<Policy>(p).throw_if_error();
#endif
    cpu::verify_step<Policy>(p).throw_if_error();
  }
  template <class Params>
  void commit(const Params& p) const {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) return replayssm::cuda::commit_drafts(p).throw_if_error();
#endif
    cpu::commit_drafts(p).throw_if_error();
  }

  /// The zeroed device report the CUDA steps record bad requests in (null on the CPU, whose
  /// steps return those errors as their status).
  step_report* report() const { return report_; }

  /// Device scratch where the CUDA replay decode step plans `batch` requests (null on the
  /// CPU, whose steps check every request before they step any).
  request_plan* request_plans(size_t batch) { return cuda_ ? array<request_plan>(batch) : nullptr; }

  /// Waits for the queued work; on the GPU also reads and clears the steps' report.
  void finish() const {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) {
      check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      replayssm::cuda::take_step_errors(report_).throw_if_error();
    }
#endif
  }

 private:
  void release(void* p) {
#if REPLAYSSM_CUDA_COMPILER
    if (cuda_) {
      cudaFree(p);
      return;
    }
#endif
    ::operator delete(p, std::align_val_t(256));
  }
#if REPLAYSSM_CUDA_COMPILER
  static void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
  }
#endif
  bool cuda_;
  std::vector<void*> owned_;
  step_report* report_ = nullptr;
};

/// A per-token table of layer inputs: `width` values per (layer, token), drawn normal with
/// standard deviation `stddev`.
struct table_spec {
  size_t width;
  float stddev;
};

/// The weights of a toy stack of recurrent layers, drawn from a fixed seed with Mamba's
/// initialization statistics: per-head decay rates and time-step biases, a token embedding
/// (the residual stream a token starts from), per-token tables of the other layer inputs,
/// and every layer's state as after a prefill.
struct model_weights {
  std::vector<float> A_log;    // [layers][heads]: decay rate exp(A_log), log-uniform in [1, 16]
  std::vector<float> dt_bias;  // [layers][heads]: softplus^-1(dt0), dt0 log-uniform in [1e-3, 1e-1]
  std::vector<float> embed;    // [vocab][d_model], normal with standard deviation 1
  std::vector<std::vector<float>> tables;         // one per table_spec: [layers][vocab][width]
  std::vector<std::vector<float>> initial_state;  // [layers] -> [batch][state_elements]

  model_weights(uint64_t seed, int layers, int heads, int vocab, size_t d_model, const std::vector<table_spec>& specs,
                size_t state_elements, int batch, float state_stddev) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> log_a(0.0f, std::log(16.0f)), log_dt(std::log(1e-3f), std::log(1e-1f));
    for (int i = 0; i < layers * heads; ++i) {
      A_log.push_back(log_a(rng));
      dt_bias.push_back(std::log(std::expm1(std::exp(log_dt(rng)))));
    }
    auto fill = [&](std::vector<float>& v, size_t n, float stddev) {
      std::normal_distribution<float> dist(0.0f, stddev);
      v.resize(n);
      for (auto& e : v) e = dist(rng);
    };
    fill(embed, size_t(vocab) * d_model, 1.0f);
    for (const table_spec& t : specs) {
      tables.emplace_back();
      fill(tables.back(), size_t(layers) * vocab * t.width, t.stddev);
    }
    for (int l = 0; l < layers; ++l) {
      initial_state.emplace_back();
      fill(initial_state.back(), size_t(batch) * state_elements, state_stddev);
    }
  }
};

/// The weights of a toy Mamba-2 stack: A = -exp(A_log), D = 1, and per-token tables of the
/// gate z (unit normal), B and C (unit normal, group-major, B then C) and the raw dt (standard
/// deviation 0.3); states normal with standard deviation 0.5.
struct mamba2_weights : model_weights {
  std::vector<float> A, D;  // [layers][heads]

  mamba2_weights(uint64_t seed, const mamba2_layer_shape& s, int layers, int vocab, int batch)
      : model_weights(seed, layers, s.heads, vocab, size_t(s.heads) * s.head_dim,
                      {{size_t(s.heads) * s.head_dim, 1.0f}, {2 * size_t(s.groups) * s.state_dim, 1.0f},
                       {size_t(s.heads), 0.3f}},
                      size_t(s.state_elements()), batch, 0.5f) {
    for (float a : A_log) {
      A.push_back(-std::exp(a));
      D.push_back(1.0f);
    }
  }
  const std::vector<float>& z_table() const { return tables[0]; }   // [layers][vocab][heads * head_dim]
  const std::vector<float>& bc_table() const { return tables[1]; }  // [layers][vocab][2][groups * state_dim]
  const std::vector<float>& dt_table() const { return tables[2]; }  // [layers][vocab][heads]
};

/// The examples' `main`: `parse(argc, argv, options)` parses the options and checks that
/// they can run (args.hpp: a usage error is exit code 2, --help exit code 0), then `run`;
/// an exception becomes exit code 1.
template <class Options, class Parse, class Run>
int example_main(int argc, char** argv, Parse parse, Run run) {
  Options o;
  if (const int code = parse(argc, argv, o); code != args::proceed) return code;
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

}  // namespace replayssm_example
