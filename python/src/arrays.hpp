// SPDX-License-Identifier: Apache-2.0
/// \file arrays.hpp
/// The Python module's view of an array argument (what DLPack describes: data, element
/// type, device, shape and strides) and the checks that turn a wrong array into an error
/// naming it. Free of Python, so that the CUDA translation units include it too.
#pragma once

#include <cstdint>
#include <string>

#include <replayssm/runtime/status.hpp>

namespace replayssm_python {

namespace rs = replayssm;

/// Element types of the arrays the steps take.
enum class element : uint8_t { f32, f16, bf16, i32, u8, other };

inline const char* element_name(element e) {
  switch (e) {
    case element::f32:
      return "float32";
    case element::f16:
      return "float16";
    case element::bf16:
      return "bfloat16";
    case element::i32:
      return "int32";
    case element::u8:
      return "uint8";
    case element::other:
      break;
  }
  return "another dtype";
}

inline int element_size(element e) {
  return e == element::u8 ? 1 : e == element::f16 || e == element::bf16 ? 2 : 4;
}

/// Where an array lives (DLPack's device types; `none` for an argument not given).
enum class device_type : int32_t { none = 0, cpu = 1, cuda = 2 };

/// One array argument, borrowed from the caller for the duration of a call.
struct array {
  static constexpr int max_dims = 6;
  const char* name = "";
  void* data = nullptr;
  element type = element::other;
  uint8_t dtype_code = 0, dtype_bits = 0;  ///< DLPack's, for naming an `other` type
  device_type device = device_type::none;
  int32_t device_id = 0;
  int32_t ndim = 0;
  int64_t shape[max_dims] = {};
  int64_t strides[max_dims] = {};  ///< in elements

  bool given() const { return device != device_type::none; }
  /// The element type's name, e.g. `float32` (DLPack's codes for the types the steps never take).
  std::string type_name() const {
    if (type != element::other) return element_name(type);
    static const char* const codes[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
    return (dtype_code < 7 ? codes[dtype_code] : "dtype code " + std::to_string(dtype_code) + " of ") +
           std::to_string(dtype_bits);
  }
  int64_t size() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= shape[d];
    return n;
  }
  int64_t bytes() const { return size() * element_size(type); }
  /// Row-major with no gaps (dimensions of extent 1 may have any stride).
  bool contiguous() const {
    int64_t expected = 1;
    for (int d = ndim - 1; d >= 0; --d) {
      if (shape[d] != 1 && strides[d] != expected) return false;
      expected *= shape[d];
    }
    return true;
  }
  std::string shape_text() const {
    std::string text = "[";
    for (int d = 0; d < ndim; ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
    return text + "]";
  }
};

inline std::string device_text(device_type d, int32_t id) {
  return d == device_type::cpu ? "cpu" : d == device_type::cuda ? "cuda:" + std::to_string(id) : "another device";
}

/// Checks a step's arrays one after another and keeps the first error, which starts with
/// `who` (the recurrence) and names the array. Every array must live where the step runs.
class checker {
 public:
  checker(const char* who, device_type device, int32_t device_id) : who_(who), device_(device), device_id_(device_id) {}

  /// An array of `type` with `dims` dimensions whose extents equal `extents` where those are
  /// not -1 (`layout` spells them out for the message) and whose last dimension is contiguous.
  checker& strided(const array& a, element type, int dims, const int64_t* extents, const char* layout,
                   bool optional = false) {
    if (!present(a, type, optional)) return *this;
    bool ok = a.ndim == dims;
    for (int d = 0; ok && d < dims; ++d) ok = extents[d] < 0 || a.shape[d] == extents[d];
    if (!ok) return fail(a, "expected shape " + layout_text(dims, extents, layout) + ", got " + a.shape_text());
    if (a.shape[dims - 1] > 1 && a.strides[dims - 1] != 1)
      return fail(
          a, "its last dimension must be contiguous (stride 1), got stride " + std::to_string(a.strides[dims - 1]));
    // Entries of a dimension must not overlap (the launchers check it too, but name the
    // params' fields: an output is `y` or `o` there).
    int64_t extent = a.shape[dims - 1];  // elements one entry of dimension d spans
    for (int d = dims - 2; d >= 0; --d) {
      if (a.strides[d] < extent)
        return fail(a, "dimension " + std::to_string(d) + " has stride " + std::to_string(a.strides[d]) +
                           ", smaller than the " + std::to_string(extent) +
                           " elements of one entry (they would overlap)");
      extent += (a.shape[d] - 1) * a.strides[d];
    }
    return *this;
  }

  /// The first activation, whose element type (float32, float16 or bfloat16) the others share.
  checker& activation(const array& a) {
    if (!present(a, a.type, false)) return *this;
    if (a.type != element::f32 && a.type != element::f16 && a.type != element::bf16)
      return fail(a, "expected float32, float16 or bfloat16 activations, got " + a.type_name());
    return *this;
  }

  /// A contiguous vector of `type` with at least `n` elements.
  checker& vector(const array& a, element type, int64_t n, const char* what, bool optional = false) {
    if (!present(a, type, optional)) return *this;
    if (a.ndim != 1 || !a.contiguous())
      return fail(a, std::string("expected a contiguous vector [") + what + "], got shape " + a.shape_text());
    if (a.shape[0] < n)
      return fail(
          a, "holds " + std::to_string(a.shape[0]) + " elements, expected " + std::to_string(n) + " (" + what + ")");
    return *this;
  }

  /// A contiguous buffer of `type` holding at least `bytes` bytes (`needs` says who needs them).
  checker& buffer(const array& a, element type, size_t bytes, const std::string& needs, bool optional = false) {
    if (!present(a, type, optional)) return *this;
    if (!a.contiguous()) return fail(a, "must be contiguous, got shape " + a.shape_text() + " with other strides");
    if (size_t(a.bytes()) < bytes)
      return fail(a, "holds " + std::to_string(a.bytes()) + " bytes, " + needs + " needs " + std::to_string(bytes));
    return *this;
  }

  /// An argument this step does not use, given anyway: an error rather than ignored.
  checker& unused(const array& a, const std::string& why) {
    if (error_.ok() && a.given()) error_ = rs::status::error(std::string(who_) + ": " + a.name + ": " + why);
    return *this;
  }

  checker& fail(const array& a, const std::string& what) {
    if (error_.ok()) error_ = rs::status::error(std::string(who_) + ": " + a.name + ": " + what);
    return *this;
  }

  const rs::status& status() const { return error_; }

 private:
  bool present(const array& a, element type, bool optional) {
    if (!error_.ok()) return false;
    if (!a.given()) {
      if (!optional) fail(a, "is required");
      return false;
    }
    if (a.device != device_ || (a.device == device_type::cuda && a.device_id != device_id_)) {
      fail(a, "is on " + device_text(a.device, a.device_id) + ", the step runs on " + device_text(device_, device_id_));
      return false;
    }
    if (a.type != type) {
      fail(a, std::string("expected ") + element_name(type) + ", got " + a.type_name());
      return false;
    }
    return true;
  }
  static std::string layout_text(int dims, const int64_t* extents, const char* layout) {
    std::string text = "[";
    for (int d = 0; d < dims; ++d) text += (d ? ", " : "") + (extents[d] < 0 ? "*" : std::to_string(extents[d]));
    return text + "] (" + layout + ")";
  }

  const char* who_;
  device_type device_;
  int32_t device_id_;
  rs::status error_;
};

}  // namespace replayssm_python
