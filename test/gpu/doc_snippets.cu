// SPDX-License-Identifier: Apache-2.0
// The code examples of the warp primitives' doc comments, of the README's embedding section
// and of kernels.md's warp sequence, compiled: each is included (taken from its file by
// doc_snippets.py at build time) where the names it uses are in scope, so that an example
// that no longer compiles fails the build. They are compiled, not run: the library's kernels
// and the fused-kernel example run the same calls under the tests.
#include <replayssm/cuda.cuh>

namespace replayssm_doc_snippets {
using namespace replayssm;

/// The calling warp's place (one warp per head: `cuda::detail::warp_place`), its request's
/// slot (`request_slot`) and its `warp_bytes` of temp storage in the block's dynamic shared
/// memory.
struct warp_head : replayssm::cuda::detail::warp_place {
  int32_t slot;
  uint8_t* storage;
  template <class Params>
  __device__ warp_head(const Params& p, uint32_t warp_bytes)
      : warp_place(1), slot(request_slot(p, b)), storage(dynamic_storage() + warp * warp_bytes) {}
  /// Whether the warp has a head to step: one of the layer's, in a slot that is not the pad.
  template <class Params>
  __device__ bool steps(const Params& p) const {
    return h < p.heads && slot != p.pad_slot_id;
  }

 private:
  __device__ static uint8_t* dynamic_storage() {
    extern __shared__ float4 warp_storage[];
    return reinterpret_cast<uint8_t*>(warp_storage);
  }
};

#include "mamba2_warp_step_1.inc"

/// The kernel of mamba2_warp_step's example.
template <class Policy, class Act>
__global__ void mamba2_warp_step_example(const mamba2_params<Act> p, uint32_t warp_bytes) {
  const warp_head at(p, warp_bytes);
  if (!at.steps(p)) return;
  const mamba2_head_views<Policy, Act> v(p, at.b, at.h, at.slot);
  const mamba2_layer_shape shape = p.shape();
  uint8_t* storage = at.storage;
#include "mamba2_warp_step_2.inc"
}
template __global__ void mamba2_warp_step_example<replay_policy<16, fp32_format>, bfloat16_t>(
    const mamba2_params<bfloat16_t>, uint32_t);

#include "mamba2_tile_step_1.inc"

/// The kernel of mamba2_tile_step's example: block (h, b) a head of request b, a warp per tile.
template <class Policy, class Act>
__global__ void mamba2_tile_step_example(const mamba2_params<Act> p) {
  __shared__ typename warp::mamba2_tile_step<Policy, Act>::TempStorage storage[16];
  const int32_t h = int32_t(blockIdx.x), b = int32_t(blockIdx.y), slot = request_slot(p, b);
  if (slot == p.pad_slot_id) return;
  step_tile(mamba2_head_views<Policy, Act>(p, b, h, slot), p.shape(), storage);
}
template __global__ void mamba2_tile_step_example<replay_policy<16, fp32_format>, bfloat16_t>(
    const mamba2_params<bfloat16_t>);

/// The kernel of kernels.md's warp sequence ("In an engine's own kernel"), of a role known
/// before the stream starts.
template <class Policy, class Act, warp::warp_role Role>
__global__ void kernels_md_sequence(const mamba2_params<Act> p, uint32_t warp_bytes) {
  const warp_head at(p, warp_bytes);
  if (!at.steps(p)) return;
  const int32_t b = at.b, h = at.h, slot = at.slot;
  const mamba2_layer_shape shape = p.shape();
  uint8_t* warp_storage = at.storage;
#include "kernels_md_sequence_1.inc"
}
template __global__ void kernels_md_sequence<replay_policy<16, fp32_format>, bfloat16_t, warp::warp_role::read>(
    const mamba2_params<bfloat16_t>, uint32_t);

/// The kernel of gdn_warp_step's example: a read step, one warp per value head.
template <class Policy, class Act>
__global__ void gdn_warp_read_example(const gdn_params<Act> p, uint32_t warp_bytes) {
  const warp_head at(p, warp_bytes);
  if (!at.steps(p)) return;
  const gdn_head_views<Policy, Act> v(p, at.b, at.h, at.slot);
  const gdn_layer_shape shape = p.shape();
  uint8_t* storage = at.storage;
#include "gdn_warp_read_1.inc"
}
template __global__ void gdn_warp_read_example<replay_policy<16, fp32_format>, bfloat16_t>(const gdn_params<bfloat16_t>,
                                                                                           uint32_t);

}  // namespace replayssm_doc_snippets

// The README's kernel, whole (its includes and using-directive included).
namespace readme_embedding {
#include "readme_embedding_1.inc"
template __global__ void engine_layer<replayssm::replay_policy<16, replayssm::fp32_format>, replayssm::bfloat16_t>(
    const replayssm::mamba2_params<replayssm::bfloat16_t>, const float*, uint32_t);
}  // namespace readme_embedding
