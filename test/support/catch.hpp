// SPDX-License-Identifier: Apache-2.0
// Catch2, version 2 or 3, behind one include: the build defines REPLAYSSM_CATCH2_V3 when it
// found version 3 (test/CMakeLists.txt). The tests use only what both versions share, plus
// `contains_text`, the string matcher whose name differs between them.
#pragma once

#include <string>

#if defined(REPLAYSSM_CATCH2_V3)
#include <catch2/catch_all.hpp>
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif

namespace replayssm_test {

/// Matches a string that contains `text`.
inline auto contains_text(const std::string& text) {
#if defined(REPLAYSSM_CATCH2_V3)
  return Catch::Matchers::ContainsSubstring(text);
#else
  return Catch::Matchers::Contains(text);
#endif
}

}  // namespace replayssm_test
