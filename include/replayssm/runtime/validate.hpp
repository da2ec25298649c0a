// SPDX-License-Identifier: Apache-2.0
/// \file validate.hpp
/// The host checks every recurrence's launchers share (activations, state pools,
/// token counts, slots and flush phases). Generic over the params of any recurrence: they
/// share the fields used here. Each message starts with `who` (the recurrence's name).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "replayssm/replay/cursor.hpp"
#include "replayssm/runtime/requests.hpp"
#include "replayssm/runtime/status.hpp"

namespace replayssm {
namespace detail {

inline std::string field(const char* name, int64_t value) {
  return std::string(name) + "=" + std::to_string(value);
}

inline bool aligned(const void* p, int64_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % uintptr_t(alignment) == 0;
}

/// Alignment the vector loads of a plane with `chunk_bytes`-byte chunks need (at most 16).
inline int64_t chunk_alignment(int64_t chunk_bytes) {
  int64_t a = 1;
  while (a < 16 && chunk_bytes % (a * 2) == 0) a *= 2;
  return a;
}

/// Checks a `[batch][rows][inner]` activation: present, aligned, rows and batches disjoint.
inline status check_rows(const char* who, const char* name, const void* ptr, int64_t batch_stride, int64_t row_stride,
                         int32_t rows, int32_t inner, int elem_size, bool optional = false) {
  const std::string what = std::string(who) + ": " + name;
  if (ptr == nullptr) return optional ? status{} : status::error(what + " is null");
  if (!aligned(ptr, elem_size))
    return status::error(what + " is not aligned to its element size (" + std::to_string(elem_size) + " bytes)");
  if (row_stride < inner)
    return status::error(what + ": " + field("row stride", row_stride) + " is smaller than the row length " +
                         std::to_string(inner) + " (rows would overlap)");
  if (batch_stride < (rows - 1) * row_stride + inner)
    return status::error(what + ": " + field("batch stride", batch_stride) + " is smaller than one request's extent " +
                         std::to_string((rows - 1) * row_stride + inner));
  return {};
}

/// Checks a state pool in `Format`: present, aligned for its vector loads, scales present.
template <class Format>
status check_pool(const char* who, const char* name, const void* data, const void* scales) {
  const std::string what = std::string(who) + ": " + name;
  if (data == nullptr) return status::error(what + " is null");
  if (!aligned(data, chunk_alignment(Format::data_bytes_per_chunk)))
    return status::error(what + " is not aligned to " + std::to_string(chunk_alignment(Format::data_bytes_per_chunk)) +
                         " bytes (" + Format::name + " chunks are loaded as vectors)");
  if constexpr (Format::scale_bytes_per_chunk > 0) {
    if (scales == nullptr) return status::error(what + " scales are null (" + Format::name + " is a scaled format)");
    if (!aligned(scales, chunk_alignment(Format::scale_bytes_per_chunk)))
      return status::error(what + " scales are misaligned");
  }
  return {};
}

/// Checks the token counts of a decode or verify step (`kind`).
template <class Policy, class Params>
status check_tokens(const char* who, const Params& p, step_kind kind, bool host_memory) {
  const std::string w = std::string(who) + ": ";
  if (kind == step_kind::decode) {
    if (p.tokens != 1 || p.token_counts != nullptr)
      return status::error(w + "a decode step takes one token per request (" + field("tokens", p.tokens) +
                           "); speculative drafts go through the verify step");
  } else {
    if (Policy::is_writeback)
      return status::error(w + "the verify step needs a replay policy (drafts wait in the window)");
    if (p.tokens < 1 || p.tokens > max_draft_tokens)
      return status::error(w + field("tokens", p.tokens) +
                           " is outside [1, max_draft_tokens=" + std::to_string(max_draft_tokens) + "]");
    if (p.tokens > Policy::window)
      return status::error(w + field("tokens", p.tokens) + " drafts do not fit the window of " +
                           std::to_string(Policy::window));
    if (p.template ring_entries<Policy>() < Policy::window + p.tokens)
      return status::error(w + field("window_entries", p.template ring_entries<Policy>()) +
                           " is too short for a verify step: it needs window + tokens = " +
                           std::to_string(Policy::window + p.tokens) + " ring entries");
    if (host_memory) {
      if (status s = check_token_counts(p, who); !s) return s;
    }
  }
  if (p.window_entries != 0 && p.window_entries < Policy::window)
    return status::error(w + field("window_entries", p.window_entries) + " is shorter than the window " +
                         std::to_string(Policy::window));
  return {};
}

/// Checks the slot fields: slots exist, requests without slot indices fit, the pad id is
/// not a real slot.
template <class Params>
status check_slot_fields(const char* who, const Params& p) {
  const std::string w = std::string(who) + ": ";
  if (p.num_slots <= 0) return status::error(w + field("num_slots", p.num_slots) + " must be positive");
  if (p.slot_indices == nullptr && p.batch > p.num_slots)
    return status::error(w + "without slot_indices request b uses slot b, but " + field("batch", p.batch) +
                         " exceeds " + field("num_slots", p.num_slots));
  if (p.pad_slot_id >= 0 && p.pad_slot_id < p.num_slots)
    return status::error(w + field("pad_slot_id", p.pad_slot_id) +
                         " names a real slot (num_slots=" + std::to_string(p.num_slots) + ")");
  return {};
}

/// The message of request `b`'s `slot_errors`, naming the buffer, the index and what was
/// expected.
template <class Params>
std::string describe_slot_errors(const Params& p, int32_t b, uint32_t errors) {
  const int32_t slot = request_slot(p, b);
  const std::string at = "slot_indices[" + std::to_string(b) + "]=" + std::to_string(slot);
  if (errors & error_slot_out_of_range)
    return at + " is outside [0, " + std::to_string(p.num_slots) + ") and is not the pad id " +
           std::to_string(p.pad_slot_id);
  int32_t other = 0;
  while (other == b || request_slot(p, other) != slot) ++other;
  return at + " repeats slot_indices[" + std::to_string(other) +
         "]: two requests of one step cannot share a state slot";
}

/// The message of request `b`'s `request_errors`, naming the buffer, the index and what was
/// expected.
template <class Policy, step_kind Kind, class Params>
std::string describe_request_errors(const Params& p, int32_t b, uint32_t errors) {
  if (errors & (error_slot_out_of_range | error_duplicate_slot)) return describe_slot_errors(p, b, errors);
  const int32_t slot = request_slot(p, b);
  int32_t h = 0;
  while (h + 1 < p.heads && head_errors<Policy, Kind>(p, b, slot, h) == step_ok) ++h;
  const int64_t index = int64_t(slot) * p.heads + h;
  if (head_errors<Policy, Kind>(p, b, slot, h) == step_ok)
    return "request " + std::to_string(b) + " (slot " + std::to_string(slot) + "): " + describe_step_errors(errors) +
           ": the cursors of its heads disagree on whether the window is full (every step moves a slot's heads "
           "together)";
  std::string text = "request " + std::to_string(b) + " (slot " + std::to_string(slot) + ", head " + std::to_string(h) +
                     "): " + describe_step_errors(errors);
  if (errors & error_phase_out_of_range)
    text += ": flush_phase[" + std::to_string(slot) + "]=" + std::to_string(p.flush_phase[slot]) +
            " is outside [0, window=" + std::to_string(Policy::window) + ")";
  if (errors & error_cursor_out_of_range) {
    const replay_cursor& c = p.cursors[index];
    text += ": cursors[" + std::to_string(index) + "] holds length=" + std::to_string(c.length) +
            " start=" + std::to_string(c.start) + " pending=" + std::to_string(c.pending) +
            " flush_count=" + std::to_string(c.flush_count);
  }
  return text;
}

/// Checks that device params carry a report: the device finds bad slots and cursors itself.
template <class Params>
status check_report(const char* who, const Params& p) {
  if (p.report == nullptr)
    return status::error(std::string(who) +
                         ": report is null: the device steps report bad slot indices and cursors "
                         "there (a zeroed replayssm::step_report in device memory)");
  if (!aligned(p.report, alignof(step_report))) return status::error(std::string(who) + ": report is misaligned");
  return {};
}

/// Checks the slot of every request in host memory (`slot_errors`).
template <class Params>
status check_request_slots(const char* who, const Params& p) {
  for (int32_t b = 0; b < p.batch; ++b)
    if (const uint32_t errors = slot_errors(p, b); errors != step_ok)
      return status::error(std::string(who) + ": " + describe_slot_errors(p, b, errors));
  return {};
}

/// Checks every request of a step of `kind` in host memory (`request_errors`) before any
/// state is touched, so that a step is all or nothing.
template <class Policy, class Params>
status check_requests(const char* who, const Params& p, step_kind kind) {
  for (int32_t b = 0; b < p.batch; ++b) {
    const uint32_t errors = kind == step_kind::decode ? request_errors<Policy, step_kind::decode>(p, b)
                                                      : request_errors<Policy, step_kind::verify>(p, b);
    if (errors == step_ok) continue;
    const std::string text = kind == step_kind::decode
                                 ? describe_request_errors<Policy, step_kind::decode>(p, b, errors)
                                 : describe_request_errors<Policy, step_kind::verify>(p, b, errors);
    return status::error(std::string(who) + ": " + text + "; nothing was stepped");
  }
  return {};
}

}  // namespace detail

/// A recurrence's checks of a step's params before it runs, shared by its CPU and CUDA steps
/// and specialized for its params by its snapshot.hpp: `step<Policy>(p, host_memory, kind)`
/// and, for the snapshot baseline, `snapshot<StateFormat>(p, host_memory)`.
template <class Params>
struct step_checks;

}  // namespace replayssm
