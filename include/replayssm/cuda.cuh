// SPDX-License-Identifier: Apache-2.0
/// \file cuda.cuh
/// Every public header, with the ready-made CUDA kernels and launchers of every recurrence
/// (namespace `replayssm::cuda`). Compile with nvcc.
#pragma once

#include "replayssm/replayssm.hpp"
#include "replayssm/runtime/cuda_launch.cuh"

// One line per recurrence.
#include "replayssm/gated_deltanet/cuda.cuh"
#include "replayssm/mamba2/cuda.cuh"
