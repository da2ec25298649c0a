// SPDX-License-Identifier: Apache-2.0
// The Mamba-2 steps of the Python module on CUDA devices (one translation unit per
// recurrence, so that they compile in parallel).
#include "cuda_backend.cuh"

namespace replayssm_python {

rs::status cuda_mamba2_step(const step_call& call, const mamba2_args& args) {
  return on_device_of(args.x, [&] { return mamba2_step<cuda_backend>(call, args); });
}

}  // namespace replayssm_python
