// SPDX-License-Identifier: Apache-2.0
/// \file config.hpp
/// Host/device qualifiers and capability macros, defined in one place.
#pragma once

#include <cstdint>

#if defined(__CUDACC__) || defined(__HIPCC__)
/// Qualifier for every function usable on host and device.
#define REPLAYSSM_HOST_DEVICE __forceinline__ __host__ __device__
#define REPLAYSSM_CUDA_COMPILER 1
#else
#define REPLAYSSM_HOST_DEVICE inline
#define REPLAYSSM_CUDA_COMPILER 0
#endif

/// 1 while compiling device code, 0 on the host pass and under a plain C++ compiler.
#if defined(__CUDA_ARCH__)
#define REPLAYSSM_DEVICE_PASS 1
#else
#define REPLAYSSM_DEVICE_PASS 0
#endif

/// Marks the CPU launchers' per-head function (runtime/cpu_launch.hpp): everything a head step
/// calls is inlined into it (GCC, Clang). GCC otherwise left the step's loops out of line
/// wherever a translation unit called one instantiation from two places, and the CPU
/// write-back step took twice as long (cpu_decode_bench with a second caller).
#if defined(__GNUC__)
#define REPLAYSSM_FLATTEN __attribute__((flatten))
#else
#define REPLAYSSM_FLATTEN
#endif

/// Unrolls the next loop in device code (its trip count must be a constant): arrays indexed by
/// its counter then stay in registers. Without it, loops whose bodies hold a Philox draw
/// or a conversion were left rolled and their arrays went to local memory.
#if REPLAYSSM_DEVICE_PASS
#define REPLAYSSM_UNROLL _Pragma("unroll")
#else
#define REPLAYSSM_UNROLL
#endif

/// Keeps the next loop rolled in device code: a loop over a thread's share of a run-time
/// count with a run-time stride, which unrolled would first divide by the stride for its
/// trip count (some thirty instructions on the path of every thread that takes it).
#if REPLAYSSM_DEVICE_PASS
#define REPLAYSSM_ROLLED _Pragma("unroll 1")
#else
#define REPLAYSSM_ROLLED
#endif

/// 1 where `cvt.rs` (hardware stochastic rounding) exists: the architecture-specific
/// targets sm_100a and sm_103a. Everywhere else, the host included, the software path
/// that consumes the same random bits runs instead.
#if defined(__CUDA_ARCH__) && (defined(__CUDA_ARCH_FEAT_SM100_ALL) || defined(__CUDA_ARCH_FEAT_SM103_ALL))
#define REPLAYSSM_HAS_HW_STOCHASTIC_ROUNDING 1
#else
#define REPLAYSSM_HAS_HW_STOCHASTIC_ROUNDING 0
#endif

/// Host code compiled with -ffast-math (or -Ofast) reorders sums, fuses products, drops NaN
/// tests and flushes subnormals, so its states would silently differ from the device's: the
/// headers refuse it. Define REPLAYSSM_ALLOW_FAST_MATH to accept CPU states that differ.
#if defined(__FAST_MATH__) && !defined(REPLAYSSM_ALLOW_FAST_MATH)
#error "ReplaySSM: host code compiled with -ffast-math (or -Ofast) would not give the device's bits (reordered sums, fused products, dropped NaN tests, flushed subnormals): compile it without, or define REPLAYSSM_ALLOW_FAST_MATH to accept CPU states that differ from the GPU's"
#endif

namespace replayssm {

/// Library version, kept in step with the CMake project version.
inline constexpr int version_major = 0;
inline constexpr int version_minor = 1;
inline constexpr int version_patch = 0;

}  // namespace replayssm
