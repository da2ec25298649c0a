// SPDX-License-Identifier: Apache-2.0
// Catch2 version 2's main, compiled once and linked into every host test program (version 3
// brings its own, Catch2::Catch2WithMain).
#define CATCH_CONFIG_MAIN
#include "support/catch.hpp"
