// SPDX-License-Identifier: Apache-2.0
/// \file cuda_backend.cuh
/// The CUDA launchers, for `mamba2_step` and `gdn_step` (steps.hpp), on the caller's stream
/// and the device the arrays live on.
#pragma once

#include <cuda_runtime.h>

#include <replayssm/cuda.cuh>

#include "steps.hpp"

namespace replayssm_python {

struct cuda_backend {
  using activations = type_list<__nv_bfloat16>;
  using policy_list = cuda_policies;
  template <class Policy, class Params>
  static rs::status decode(const Params& p, uintptr_t stream) {
    return rs::cuda::decode_step<Policy>(p, reinterpret_cast<cudaStream_t>(stream));
  }
  template <class Policy, class Params>
  static rs::status verify(const Params& p, uintptr_t stream) {
    return rs::cuda::verify_step<Policy>(p, reinterpret_cast<cudaStream_t>(stream));
  }
};

/// Runs `f()` with the device of `a` current, then makes the caller's current again.
template <class F>
rs::status on_device_of(const array& a, F&& f) {
  int previous = 0;
  if (const cudaError_t e = cudaGetDevice(&previous); e != cudaSuccess)
    return rs::status::error(std::string("replayssm: no CUDA device: ") + cudaGetErrorString(e));
  if (previous == a.device_id) return f();
  if (const cudaError_t e = cudaSetDevice(a.device_id); e != cudaSuccess)
    return rs::status::error(std::string("replayssm: selecting cuda:") + std::to_string(a.device_id) + ": " +
                             cudaGetErrorString(e));
  const rs::status s = f();
  cudaSetDevice(previous);
  return s;
}

}  // namespace replayssm_python
