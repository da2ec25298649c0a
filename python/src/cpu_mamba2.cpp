// SPDX-License-Identifier: Apache-2.0
// The Mamba-2 steps of the Python module on the CPU (one translation unit per recurrence, so
// that they compile in parallel).
#include "cpu_backend.hpp"

namespace replayssm_python {

rs::status cpu_mamba2_step(const step_call& call, const mamba2_args& args) {
  return mamba2_step<cpu_backend>(call, args);
}

}  // namespace replayssm_python
