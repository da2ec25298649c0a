// SPDX-License-Identifier: Apache-2.0
// Main of the GPU tests: prints the skip marker when no CUDA device is present.
#define CATCH_CONFIG_RUNNER
#include "../support/catch.hpp"
#include <cuda_runtime.h>

#include <cstdio>

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("REPLAYSSM_SKIP_NO_GPU: no CUDA device, GPU tests skipped\n");
    return 0;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("GPU tests on %s (sm_%d%d)\n", prop.name, prop.major, prop.minor);
  return Catch::Session().run(argc, argv);
}
