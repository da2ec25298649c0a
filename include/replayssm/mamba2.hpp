// SPDX-License-Identifier: Apache-2.0
/// \file mamba2.hpp
/// The Mamba-2 recurrence, host side: trait and shapes, head step, params, validation,
/// snapshot baseline, buffer sizes, state load/store and the CPU launchers. Its CUDA
/// launchers are in mamba2/cuda.cuh.
#pragma once

#include "replayssm/mamba2/buffers.hpp"
#include "replayssm/mamba2/cpu.hpp"
#include "replayssm/mamba2/head_step.hpp"
#include "replayssm/mamba2/params.hpp"
#include "replayssm/mamba2/recurrence.hpp"
#include "replayssm/mamba2/snapshot.hpp"
#include "replayssm/mamba2/state_io.hpp"
#include "replayssm/mamba2/validate.hpp"
