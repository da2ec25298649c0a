// SPDX-License-Identifier: Apache-2.0
/// \file status.hpp
/// Layer 6: the result of a host launcher: success, or a descriptive error.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

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

}  // namespace replayssm
