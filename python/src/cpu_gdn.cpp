// SPDX-License-Identifier: Apache-2.0
// The Gated DeltaNet steps of the Python module on the CPU.
#include "cpu_backend.hpp"

namespace replayssm_python {

rs::status cpu_gdn_step(const step_call& call, const gdn_args& args) {
  return gdn_step<cpu_backend>(call, args);
}

}  // namespace replayssm_python
