// SPDX-License-Identifier: Apache-2.0
// The Gated DeltaNet steps of the Python module on CUDA devices.
#include "cuda_backend.cuh"

namespace replayssm_python {

rs::status cuda_gdn_step(const step_call& call, const gdn_args& args) {
  return on_device_of(args.first(), [&] { return gdn_step<cuda_backend>(call, args); });
}

}  // namespace replayssm_python
