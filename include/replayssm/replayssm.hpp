// SPDX-License-Identifier: Apache-2.0
/// \file replayssm.hpp
/// Every host-compilable public header: the shared layers and every recurrence. The CUDA
/// kernels and launchers are in replayssm/cuda.cuh (compile with nvcc).
#pragma once

#include "replayssm/config.hpp"
#include "replayssm/diagnostics/describe.hpp"
#include "replayssm/numeric.hpp"
#include "replayssm/numeric/activation.hpp"
#include "replayssm/numeric/math.hpp"
#include "replayssm/policy/policy.hpp"
#include "replayssm/policy/traffic.hpp"
#include "replayssm/replay/cursor.hpp"
#include "replayssm/replay/executor.hpp"
#include "replayssm/replay/scalar_decay.hpp"
#include "replayssm/replay/state_pools.hpp"
#include "replayssm/replay/state_view.hpp"
#include "replayssm/replay/step_plan.hpp"
#include "replayssm/runtime/commit.hpp"
#include "replayssm/runtime/cpu_launch.hpp"
#include "replayssm/runtime/gpu_tuning.hpp"
#include "replayssm/runtime/requests.hpp"
#include "replayssm/runtime/status.hpp"
#include "replayssm/runtime/validate.hpp"

// One line per recurrence.
#include "replayssm/gated_deltanet.hpp"
#include "replayssm/mamba2.hpp"
