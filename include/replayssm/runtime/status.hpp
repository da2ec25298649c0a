// SPDX-License-Identifier: Apache-2.0
/// \file status.hpp
/// The result of a host launcher: success, or a descriptive error, and the text of
/// the error bits the device reports.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include "replayssm/replay/cursor.hpp"

namespace replayssm {

/// Outcome of a launcher call. Launchers never throw and are [[nodiscard]];
/// `throw_if_error` converts.
class status {
 public:
  /// Success.
  status() = default;
  /// A failure described by `message`.
  static status error(std::string message) { return status(std::move(message)); }

  bool ok() const { return message_.empty(); }
  explicit operator bool() const { return ok(); }
  /// Empty on success.
  const std::string& message() const { return message_; }
  /// Throws std::invalid_argument carrying the message when this is an error.
  void throw_if_error() const {
    if (!ok()) throw std::invalid_argument(message_);
  }

 private:
  explicit status(std::string message) : message_(std::move(message)) {}
  std::string message_;
};

/// Text for a set of step_error bits: what was wrong, not what was done about it.
inline std::string describe_step_errors(uint32_t bits) {
  std::string text;
  auto add = [&](uint32_t bit, const char* what) {
    if (bits & bit) text += (text.empty() ? "" : "; ") + std::string(what);
  };
  add(error_slot_out_of_range, "a slot index was outside [0, num_slots) and not the pad id");
  add(error_duplicate_slot, "two requests of the step named one state slot");
  add(error_cursor_out_of_range, "a window cursor held a length or ring start that no step could have left");
  add(error_phase_out_of_range, "a flush phase was outside [0, window)");
  add(error_tokens_out_of_range, "a request's token count was outside [1, tokens] or beyond the window");
  add(error_accepted_out_of_range, "a commit accepted more drafts than were verified (or fewer than 0)");
  return text;
}

}  // namespace replayssm
