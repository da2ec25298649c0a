// SPDX-License-Identifier: Apache-2.0
/// \file gated_deltanet.hpp
/// The Gated DeltaNet recurrence, host side: trait, window modes and shapes, input
/// normalization, head step, params, validation, snapshot baseline, buffer sizes, state
/// load/store and the CPU launchers. Its CUDA launchers are in gated_deltanet/cuda.cuh.
#pragma once

#include "replayssm/gated_deltanet/buffers.hpp"
#include "replayssm/gated_deltanet/cpu.hpp"
#include "replayssm/gated_deltanet/head_step.hpp"
#include "replayssm/gated_deltanet/inputs.hpp"
#include "replayssm/gated_deltanet/params.hpp"
#include "replayssm/gated_deltanet/recurrence.hpp"
#include "replayssm/gated_deltanet/snapshot.hpp"
#include "replayssm/gated_deltanet/state_io.hpp"
#include "replayssm/gated_deltanet/validate.hpp"
