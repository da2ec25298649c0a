// SPDX-License-Identifier: Apache-2.0
// Entry point of the GPU decode benchmarks: registers the Mamba-2 (mamba2/) and
// Gated DeltaNet (gated_deltanet/) benchmarks, measures the device's copy and read
// bandwidths once, and runs what --benchmark_filter selects. Without a device it prints the
// skip marker and exits 0 (--benchmark_list_tests still lists the benchmarks).
#include "bench_device.cuh"

#include <cstring>

namespace replayssm_bench {
void register_mamba2();  // mamba2/decode_bench.cu
void register_gdn();     // gated_deltanet/decode_bench.cu
}  // namespace replayssm_bench

int main(int argc, char** argv) {
  bool list_only = false;
  for (int i = 1; i < argc; ++i)
    for (const char* flag : {"--benchmark_list_tests", "--benchmark_list_tests=true", "--benchmark_list_tests=1"})
      list_only = list_only || std::strcmp(argv[i], flag) == 0;
  int devices = 0;
  if (!list_only && (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0)) {
    std::printf("REPLAYSSM_SKIP_NO_GPU: no CUDA device, nothing to measure\n");
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  replayssm_bench::register_mamba2();
  replayssm_bench::register_gdn();
  if (!list_only) {
    const auto& bw = replayssm_bench::measured_bandwidth();
    benchmark::AddCustomContext("copy_bandwidth_GBps", std::to_string(bw.copy_gbs));
    benchmark::AddCustomContext("read_bandwidth_GBps", std::to_string(bw.read_gbs));
    benchmark::AddCustomContext("inplace_bandwidth_GBps", std::to_string(bw.inplace_gbs));
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
