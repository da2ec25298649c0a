// SPDX-License-Identifier: Apache-2.0
/// \file requests.hpp
/// Layer 6: what a request of a step's params maps to (its state slot, its token count), and
/// the host checks of the per-request counts. Generic over the params of any recurrence:
/// they share the fields used here.
#pragma once

#include <cstdint>
#include <string>

#include "replayssm/config.hpp"
#include "replayssm/kernels/status.hpp"

namespace replayssm {

/// The slot request `b` of `p` uses.
template <class Params>
REPLAYSSM_HOST_DEVICE int32_t request_slot(const Params& p, int32_t b) {
  return p.slot_indices != nullptr ? p.slot_indices[b] : b;
}

/// The tokens request `b` of `p` carries (its drafts in a verify step).
template <class Params>
REPLAYSSM_HOST_DEVICE int32_t request_tokens(const Params& p, int32_t b) {
  return p.token_counts != nullptr ? p.token_counts[b] : p.tokens;
}

namespace detail {

/// Every request's token count lies in [1, tokens] (host memory).
template <class Params>
status check_token_counts(const Params& p, const char* who) {
  for (int32_t b = 0; p.token_counts != nullptr && b < p.batch; ++b) {
    if (p.token_counts[b] < 1 || p.token_counts[b] > p.tokens)
      return status::error(std::string(who) + ": token_counts[" + std::to_string(b) + "]=" +
                           std::to_string(p.token_counts[b]) + " is outside [1, tokens=" + std::to_string(p.tokens) +
                           "]");
  }
  return {};
}

/// Every request accepts between 0 and the drafts it verified (host memory).
template <class Params>
status check_accepted_counts(const Params& p, const char* who) {
  for (int32_t b = 0; b < p.batch; ++b) {
    const int32_t verified = request_tokens(p, b);
    if (p.accepted_counts[b] < 0 || p.accepted_counts[b] > verified)
      return status::error(std::string(who) + ": accepted_counts[" + std::to_string(b) + "]=" +
                           std::to_string(p.accepted_counts[b]) + " is outside [0, " + std::to_string(verified) +
                           "], the drafts request " + std::to_string(b) + " verified");
  }
  return {};
}

}  // namespace detail
}  // namespace replayssm
