// SPDX-License-Identifier: Apache-2.0
// The code examples of the warp primitives' doc comments and of the README's embedding
// section, compiled: each is included (taken from its file by doc_snippets.py at build
// time) where the names it uses are in scope, so that an example that no longer compiles
// fails the build. They are compiled, not run: the library's kernels and the fused-kernel
// example run the same calls under the tests.
#include <replayssm/cuda.cuh>

namespace replayssm_doc_snippets {
using namespace replayssm;

#include "mamba2_warp_step_1.inc"

/// The kernel of mamba2_warp_step's example: one warp per head, the request's slot checked.
template <class Policy, class Act>
__global__ void mamba2_warp_step_example(const mamba2_params<Act> p, uint32_t warp_bytes) {
  extern __shared__ float4 warp_storage[];
  const int32_t b = blockIdx.y, h = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int32_t slot = p.slot_indices[b];
  if (h >= p.heads || slot == p.pad_slot_id) return;
  const mamba2_head_views<Policy, Act> v(p, b, h, slot);
  const mamba2_layer_shape shape = p.shape();
  uint8_t* storage = reinterpret_cast<uint8_t*>(warp_storage) + threadIdx.x / 32 * warp_bytes;
#include "mamba2_warp_step_2.inc"
}
template __global__ void mamba2_warp_step_example<replay_policy<16, fp32_format>, bfloat16_t>(
    const mamba2_params<bfloat16_t>, uint32_t);

/// The kernel of gated_deltanet/warp_step.cuh's example: a read step, one warp per value head.
template <class Policy, class Act, warp::copy_engine Engine>
__global__ void gdn_warp_read_example(const gdn_params<Act> p, uint32_t warp_bytes) {
  extern __shared__ float4 warp_storage[];
  const int32_t b = blockIdx.y, h = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
  const int32_t slot = p.slot_indices[b];
  if (h >= p.heads || slot == p.pad_slot_id) return;
  const gdn_head_views<Policy, Act> v(p, b, h, slot);
  const gdn_layer_shape shape = p.shape();
  uint8_t* smem = reinterpret_cast<uint8_t*>(warp_storage) + threadIdx.x / 32 * warp_bytes;
  const int lane = int(threadIdx.x % 32);
#include "gdn_warp_read_1.inc"
}
template __global__ void gdn_warp_read_example<replay_policy<16, fp32_format>, bfloat16_t, warp::copy_engine::bulk>(
    const gdn_params<bfloat16_t>, uint32_t);

}  // namespace replayssm_doc_snippets

// The README's kernel, whole (its includes and using-directive included).
namespace readme_embedding {
#include "readme_embedding_1.inc"
template __global__ void engine_layer<replayssm::replay_policy<16, replayssm::fp32_format>, replayssm::bfloat16_t>(
    const replayssm::mamba2_params<replayssm::bfloat16_t>, const float*, uint32_t);
}  // namespace readme_embedding
