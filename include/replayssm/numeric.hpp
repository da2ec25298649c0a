// SPDX-License-Identifier: Apache-2.0
/// \file numeric.hpp
/// The numeric-formats layer: value types, rounding tags, Philox random words,
/// conversions and state storage formats.
#pragma once

#include "replayssm/numeric/convert.hpp"
#include "replayssm/numeric/formats.hpp"
#include "replayssm/numeric/philox.hpp"
#include "replayssm/numeric/rounding.hpp"
#include "replayssm/numeric/types.hpp"
