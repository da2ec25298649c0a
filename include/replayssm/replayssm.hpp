// SPDX-License-Identifier: Apache-2.0
/// \file replayssm.hpp
/// Every host-compilable public header. The CUDA kernels are in kernels/cuda_decode.cuh.
#pragma once

#include "replayssm/config.hpp"
#include "replayssm/diagnostics/memory.hpp"
#include "replayssm/kernels/commit.hpp"
#include "replayssm/kernels/cpu_decode.hpp"
#include "replayssm/kernels/mamba2_params.hpp"
#include "replayssm/kernels/mamba2_snapshot.hpp"
#include "replayssm/kernels/mamba2_validate.hpp"
#include "replayssm/kernels/requests.hpp"
#include "replayssm/kernels/status.hpp"
#include "replayssm/numeric.hpp"
#include "replayssm/numeric/activation.hpp"
#include "replayssm/numeric/math.hpp"
#include "replayssm/policy/policy.hpp"
#include "replayssm/policy/traffic.hpp"
#include "replayssm/recurrence/gated_deltanet.hpp"
#include "replayssm/recurrence/mamba2.hpp"
#include "replayssm/replay/cursor.hpp"
#include "replayssm/replay/executor.hpp"
#include "replayssm/replay/gdn_inputs.hpp"
#include "replayssm/replay/head_state_io.hpp"
#include "replayssm/replay/mamba2_head_step.hpp"
#include "replayssm/replay/scalar_decay.hpp"
#include "replayssm/replay/state_view.hpp"
