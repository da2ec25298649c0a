// SPDX-License-Identifier: Apache-2.0
// Compiled for sm_80 only: the warp steps' fallback copy engine (the lanes' cp.async) must
// build for a device without bulk copies, where the launchers select it.
#include <replayssm/cuda.cuh>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#error "this check is for devices without bulk copies"
#endif

namespace replayssm::cuda::detail {
template __global__ void mamba2_warp_kernel<replay_policy<16, fp32_format>, bfloat16_t, warp::copy_engine::lanes, warp_launch::read>(mamba2_params<bfloat16_t>, uint32_t, int32_t);
template __global__ void mamba2_warp_kernel<replay_policy<16, fp32_format>, bfloat16_t, warp::copy_engine::lanes, warp_launch::flush>(mamba2_params<bfloat16_t>, uint32_t, int32_t);
template __global__ void mamba2_warp_kernel<replay_policy<16, fp32_format>, bfloat16_t, warp::copy_engine::lanes, warp_launch::planned>(mamba2_params<bfloat16_t>, uint32_t, int32_t);
template __global__ void mamba2_warp_kernel<writeback_policy<bf16_format>, float, warp::copy_engine::lanes, warp_launch::flush>(mamba2_params<float>, uint32_t, int32_t);
template __global__ void gdn_warp_kernel<replay_policy<16, fp32_format>, bfloat16_t, warp::copy_engine::lanes, warp::warp_role::read>(gdn_params<bfloat16_t>, uint32_t, int32_t);
template __global__ void gdn_warp_kernel<replay_policy<16, fp32_format>, bfloat16_t, warp::copy_engine::lanes, warp::warp_role::flush>(gdn_params<bfloat16_t>, uint32_t, int32_t);
template __global__ void gdn_warp_kernel<writeback_policy<fp32_format>, bfloat16_t, warp::copy_engine::lanes, warp::warp_role::flush>(gdn_params<bfloat16_t>, uint32_t, int32_t);
template __global__ void gdn_warp_kernel<replay_policy<16, fp32_format>, bfloat16_t, warp::copy_engine::lanes, warp::warp_role::flush, step_kind::verify>(gdn_params<bfloat16_t>, uint32_t, int32_t);
template __global__ void gdn_warp_kernel<replay_policy<16, fp32_format>, bfloat16_t, warp::copy_engine::lanes, warp::warp_role::read, step_kind::verify, gdn_warp_verify_tokens>(gdn_params<bfloat16_t>, uint32_t, int32_t);
}  // namespace replayssm::cuda::detail
