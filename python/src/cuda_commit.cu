// SPDX-License-Identifier: Apache-2.0
// Commits and the device report of the Python module on CUDA devices (any recurrence).
#include "cuda_backend.cuh"

namespace replayssm_python {

rs::status cuda_commit_drafts(const commit_args& args, uintptr_t stream) {
  return on_device_of(args.cursors, [&] {
    rs::step_params p;
    if (rs::status s = commit_params(args, p); !s) return s;
    return rs::cuda::commit_drafts(p, reinterpret_cast<cudaStream_t>(stream));
  });
}

rs::status cuda_take_step_errors(const array& report, uintptr_t stream) {
  checker c("take_step_errors", device_type::cuda, report.device_id);
  c.vector(report, element::i32, 2, "errors, request");
  if (!c.status().ok()) return c.status();
  return on_device_of(report, [&] {
    return rs::cuda::take_step_errors(static_cast<rs::step_report*>(report.data),
                                      reinterpret_cast<cudaStream_t>(stream));
  });
}

}  // namespace replayssm_python
