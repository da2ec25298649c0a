// SPDX-License-Identifier: Apache-2.0
// Compiled for sm_100a only: the hardware stochastic-rounding path (cvt.rs) must build.
#include <replayssm/cuda.cuh>

#if defined(__CUDA_ARCH__) && !REPLAYSSM_HAS_HW_STOCHASTIC_ROUNDING
#error "sm_100a must select the hardware stochastic-rounding path"
#endif

namespace replayssm::cuda::detail {
// A flush with stochastic rounding into every rounded format.
template __global__ void mamba2_decode_kernel<writeback_policy<fp16_format, round_stochastic>, float, decode_block_threads, step_kind::decode>(mamba2_params<float>);
template __global__ void mamba2_decode_kernel<writeback_policy<bf16_format, round_stochastic>, bfloat16_t, decode_block_threads, step_kind::decode>(mamba2_params<bfloat16_t>);
template __global__ void mamba2_decode_kernel<replay_policy<16, fp8_e4m3_format, fp16_format, round_stochastic>, bfloat16_t, decode_block_threads, step_kind::decode>(mamba2_params<bfloat16_t>);
template __global__ void mamba2_decode_kernel<replay_policy<16, nvfp4_format, fp16_format, round_stochastic>, bfloat16_t, decode_block_threads, step_kind::decode>(mamba2_params<bfloat16_t>);
// The warp steps' flushes, which run the decode steps of these shapes.
template __global__ void mamba2_warp_kernel<writeback_policy<fp16_format, round_stochastic>, float, warp::copy_engine::bulk, warp_launch::flush>(mamba2_params<float>, uint32_t, int32_t);
template __global__ void mamba2_warp_kernel<replay_policy<16, nvfp4_format, fp16_format, round_stochastic>, bfloat16_t, warp::copy_engine::bulk, warp_launch::flush>(mamba2_params<bfloat16_t>, uint32_t, int32_t);
}  // namespace replayssm::cuda::detail
