// SPDX-License-Identifier: Apache-2.0
// The native part of the `replayssm` Python package: the compiled-in policies, buffer sizes,
// state encoding, and the steps of both recurrences on the CPU (cpu_*.cpp) and on CUDA
// devices (cuda_*.cu), over any array that speaks DLPack (NumPy, PyTorch, CuPy) with no copies.
// The Python package (python/replayssm) wraps it; its functions are not a public API.

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "policies.hpp"
#include "steps.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace replayssm_python {
namespace {

element element_of(nb::dlpack::dtype t) {
  using code = nb::dlpack::dtype_code;
  if (t.lanes != 1) return element::other;
  if (t.code == uint8_t(code::Float) && t.bits == 32) return element::f32;
  if (t.code == uint8_t(code::Float) && t.bits == 16) return element::f16;
  if (t.code == uint8_t(code::Bfloat) && t.bits == 16) return element::bf16;
  if (t.code == uint8_t(code::Int) && t.bits == 32) return element::i32;
  if (t.code == uint8_t(code::UInt) && t.bits == 8) return element::u8;
  return element::other;
}

/// The DLPack C exchange API (DLPack 1.3) that a type publishes as a capsule named
/// `dlpack_exchange_api` in `__dlpack_c_exchange_api__` (PyTorch tensors do): it describes an
/// object's tensor from C, with no Python call and no allocation (`__dlpack__` costs a
/// PyTorch tensor about ten microseconds). Only the members used here are named.
struct dlpack_exchange_api {
  uint32_t major, minor;
  const void* previous;
  void* allocator;
  void* managed_tensor_from_py_object;
  void* managed_tensor_to_py_object;
  int (*dltensor_from_py_object)(void* object, nb::dlpack::dltensor* out);  ///< may be null
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void** stream);
};

/// The exchange API of `type`, or null (looked up once per type).
const dlpack_exchange_api* exchange_api_of(PyTypeObject* type) {
  static std::unordered_map<PyTypeObject*, const dlpack_exchange_api*> known;
  if (auto it = known.find(type); it != known.end()) return it->second;
  const dlpack_exchange_api* api = nullptr;
  if (PyObject* capsule = PyObject_GetAttrString(reinterpret_cast<PyObject*>(type), "__dlpack_c_exchange_api__")) {
    api = static_cast<const dlpack_exchange_api*>(PyCapsule_GetPointer(capsule, "dlpack_exchange_api"));
    Py_DECREF(capsule);
  }
  PyErr_Clear();
  if (api != nullptr && (api->major != 1 || api->dltensor_from_py_object == nullptr)) api = nullptr;
  known.emplace(type, api);
  return api;
}

/// The arrays of one call, converted from Python objects that speak DLPack (or the buffer
/// protocol) and kept alive until the call returns.
class arrays {
 public:
  /// Fills `args` from positional arguments in the order of its fields (`step_fields`:
  /// scalars, then arrays; None: not given). (Keyword arguments, looked up by name, cost a
  /// call about three microseconds more: a dictionary built twice and 30-odd string lookups.)
  template <class Args>
  void take(const nb::args& values, Args& args) {
    const size_t expected = field_count(args);
    if (values.size() != expected)
      throw nb::type_error((std::string(Args::who) + ": expected " + std::to_string(expected) + " arguments (" +
                            field_names(args) + "), got " + std::to_string(values.size()))
                               .c_str());
    fill(values, args, [](size_t field) { return int32_t(field); });
  }

  /// Sets each field of `args` that `value_of(field)` (its index in `step_fields` order)
  /// maps to one of `values` (-1: none) and that value is not None.
  template <class Args, class ValueOf>
  void fill(const nb::args& values, Args& args, ValueOf&& value_of) {
    size_t field = 0;
    args.for_each_scalar([&](const char* name, auto& v) {
      const int32_t i = value_of(field++);
      if (i < 0 || values[i].is_none()) return;
      if (!nb::try_cast(values[i], v))
        throw nb::type_error((std::string(Args::who) + ": " + name + " must be " +
                              (std::is_same_v<std::decay_t<decltype(v)>, bool>          ? "a bool"
                               : std::is_same_v<std::decay_t<decltype(v)>, std::string> ? "a string"
                                                                                        : "an integer"))
                                 .c_str());
    });
    args.for_each_array([&](const char* name, array& a, bool written) {
      const int32_t i = value_of(field++);
      if (i >= 0 && !values[i].is_none()) a = convert(Args::who, values[i], name, written);
    });
  }

  template <class Args>
  static size_t field_count(Args& args) {
    size_t n = 0;
    args.for_each_scalar([&](const char*, auto&) { ++n; });
    args.for_each_array([&](const char*, array&, bool) { ++n; });
    return n;
  }

  /// The names of a step's fields in their order, comma-separated.
  template <class Args>
  static std::string field_names(Args& args) {
    std::string names;
    auto add = [&](const char* field) { names += (names.empty() ? "" : ", ") + std::string(field); };
    args.for_each_scalar([&](const char* field, auto&) { add(field); });
    args.for_each_array([&](const char* field, array&, bool) { add(field); });
    return names;
  }

  /// The view of one object as an array named `name`.
  array convert(const char* who, nb::handle value, const char* name, bool written) {
    array a;
    a.name = name;
    nb::dlpack::dltensor t;
    if (const dlpack_exchange_api* api = exchange_api_of(Py_TYPE(value.ptr()));
        api != nullptr && api->dltensor_from_py_object(value.ptr(), &t) == 0) {
      describe(t, a);  // valid while `value` lives: the caller's arguments hold it
      framework_ = api;
    } else if (PyErr_Clear(); written) {
      nb::ndarray<> nd;
      if (!nb::try_cast(value, nd, false)) not_an_array(who, name, written);
      describe(nd, a);
      writable_.push_back(std::move(nd));
    } else {
      nb::ndarray<nb::ro> nd;
      if (!nb::try_cast(value, nd, false)) not_an_array(who, name, written);
      describe(nd, a);
      readonly_.push_back(std::move(nd));
    }
    if (a.device == device_type::none)
      throw nb::value_error((std::string(who) + ": " + name + ": arrays must be on the CPU or a CUDA device").c_str());
    return a;
  }

  /// The CUDA stream of a step whose first array is `first`: `stream` when given, else
  /// the current stream of the framework the arrays came from (through its exchange API),
  /// else the default stream.
  /// (`bound`: the arrays bound with the step, whose framework counts when none of these came
  /// through an exchange API.)
  uintptr_t stream_of(const array& first, nb::handle stream, const arrays* bound = nullptr) const {
    if (!stream.is_none()) return nb::cast<uintptr_t>(stream);
    void* current = nullptr;
    const dlpack_exchange_api* framework = framework_ != nullptr || bound == nullptr ? framework_ : bound->framework_;
    if (first.device == device_type::cuda && framework != nullptr &&
        framework->current_work_stream(int32_t(device_type::cuda), first.device_id, &current) != 0) {
      PyErr_Clear();
      current = nullptr;
    }
    return reinterpret_cast<uintptr_t>(current);
  }

 private:
  [[noreturn]] static void not_an_array(const char* who, const char* name, bool written) {
    throw nb::type_error((std::string(who) + ": " + name + " must be " + (written ? "a writable " : "an ") +
                          "array (NumPy, PyTorch, CuPy or any DLPack producer)")
                             .c_str());
  }
  template <class Nd>
  static void describe(const Nd& nd, array& a) {
    nb::dlpack::dltensor t;
    t.data = const_cast<void*>(static_cast<const void*>(nd.data()));
    t.device = {nd.device_type(), nd.device_id()};
    t.ndim = int32_t(nd.ndim());
    t.dtype = nd.dtype();
    t.shape = const_cast<int64_t*>(nd.shape_ptr());
    t.strides = const_cast<int64_t*>(nd.stride_ptr());
    describe(t, a);
  }
  static void describe(const nb::dlpack::dltensor& t, array& a) {
    if (t.ndim > array::max_dims)
      throw nb::value_error(
          (std::string(a.name) + ": more than " + std::to_string(array::max_dims) + " dimensions").c_str());
    a.data = static_cast<uint8_t*>(t.data) + t.byte_offset;
    a.type = element_of(t.dtype);
    a.dtype_code = t.dtype.code;
    a.dtype_bits = t.dtype.bits;
    a.device = t.device.device_type == nb::device::cpu::value    ? device_type::cpu
               : t.device.device_type == nb::device::cuda::value ? device_type::cuda
                                                                 : device_type::none;
    a.device_id = t.device.device_id;
    a.ndim = t.ndim;
    int64_t compact = 1;  // null strides: row-major
    for (int d = a.ndim - 1; d >= 0; --d) {
      a.shape[d] = t.shape[d];
      a.strides[d] = t.strides != nullptr ? t.strides[d] : compact;
      compact *= t.shape[d];
    }
  }

  const dlpack_exchange_api* framework_ = nullptr;
  std::vector<nb::ndarray<>> writable_;
  std::vector<nb::ndarray<nb::ro>> readonly_;
};

rs::dtype dtype_of(const std::string& name) {
  if (name == "float32") return rs::dtype::f32;
  if (name == "float16") return rs::dtype::f16;
  if (name == "bfloat16") return rs::dtype::bf16;
  throw nb::value_error(("replayssm: activation dtype '" + name + "' is not float32, float16 or bfloat16").c_str());
}

/// A step's arguments in their order: (name, role) with role `str`, `int` or `bool` for a
/// scalar, `read` or `written` for an array.
template <class Args>
nb::list step_fields() {
  Args args;
  nb::list fields;
  args.for_each_scalar([&](const char* name, auto& v) {
    using T = std::decay_t<decltype(v)>;
    fields.append(nb::make_tuple(name, std::is_same_v<T, std::string> ? "str"
                                       : std::is_same_v<T, bool>      ? "bool"
                                                                      : "int"));
  });
  args.for_each_array([&](const char* name, array&, bool written) {
    fields.append(nb::make_tuple(name, written ? "written" : "read"));
  });
  return fields;
}

/// Runs a step `repeats` times on the device its first array lives on, without the GIL;
/// returns the host time of one (the launcher's own cost, for the benchmarks: on a CUDA
/// device the launches are asynchronous).
template <class Cpu, class Cuda>
double run_on_device(const array& first, Cpu&& cpu, Cuda&& cuda, int repeats = 1) {
  if (repeats < 1) throw nb::value_error("replayssm: repeats must be at least 1");
  rs::status s;
  double seconds = 0;
  {
    nb::gil_scoped_release unlocked;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < repeats && s.ok(); ++i) s = first.device == device_type::cuda ? cuda() : cpu();
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / repeats;
  }
  s.throw_if_error();
  return seconds;
}

/// The array whose device a step runs on.
const array& first_of(const mamba2_args& args) {
  return args.x;
}
const array& first_of(const gdn_args& args) {
  return args.first();
}

rs::status cuda_step(const step_call& call, const mamba2_args& args) {
  return cuda_mamba2_step(call, args);
}
rs::status cuda_step(const step_call& call, const gdn_args& args) {
  return cuda_gdn_step(call, args);
}
rs::status cpu_step(const step_call& call, const mamba2_args& args) {
  return cpu_mamba2_step(call, args);
}
rs::status cpu_step(const step_call& call, const gdn_args& args) {
  return cpu_gdn_step(call, args);
}

/// Runs a step of converted arguments (`held`, with `bound`: the arrays that came through
/// the step's bound arguments) `repeats` times; the host time of one.
template <class Args>
double run_step(const Args& args, const arrays& held, nb::handle stream, int repeats, const arrays* bound = nullptr) {
  step_call call;
  call_of(args, held.stream_of(first_of(args), stream, bound), call).throw_if_error();
  return run_on_device(
      first_of(args), [&] { return cpu_step(call, args); }, [&] { return cuda_step(call, args); }, repeats);
}

/// A step from all its arguments, positional in `step_fields` order.
template <class Args>
double run_positional(const nb::args& values, nb::handle stream, int repeats) {
  arrays held;
  Args args;
  held.take(values, args);
  return run_step(args, held, stream, repeats);
}

/// A layer's step with the arguments that stay from call to call bound once: the layer's
/// buffers converted (and kept alive here), its policy and seed. A call gives the others
/// by position, in the order of `per_call` (their indices in `step_fields`); a None keeps
/// the bound value. The Python side of a call is then one tuple of its own arguments, not a
/// copy of the layer's list of all of them with these placed in it, which was a measurable
/// part of the API's host time per step (bench/python_overhead.py).
template <class Args>
class bound_step {
 public:
  bound_step(const std::vector<int32_t>& per_call, const nb::args& all) : all_(nb::borrow<nb::tuple>(all)) {
    held_.take(all, args_);
    value_of_field_.assign(arrays::field_count(args_), -1);
    for (size_t i = 0; i < per_call.size(); ++i) {
      if (per_call[i] < 0 || size_t(per_call[i]) >= value_of_field_.size())
        throw nb::value_error((std::string(Args::who) + ": a per-call field index is out of range").c_str());
      value_of_field_[per_call[i]] = int32_t(i);
    }
    per_call_values_ = per_call.size();
  }

  double operator()(const nb::args& values, nb::handle stream, int repeats) const {
    if (values.size() != per_call_values_)
      throw nb::type_error((std::string(Args::who) + ": expected " + std::to_string(per_call_values_) +
                            " per-call arguments, got " + std::to_string(values.size()))
                               .c_str());
    Args args = args_;
    arrays held;
    held.fill(values, args, [&](size_t field) { return value_of_field_[field]; });
    return run_step(args, held, stream, repeats, &held_);
  }

 private:
  nb::tuple all_;  // the bound Python objects, alive while the step is
  arrays held_;
  Args args_;
  std::vector<int32_t> value_of_field_;
  size_t per_call_values_ = 0;
};

template <class Args>
void def_bound_step(nb::module_& m, const char* bind, const char* type) {
  nb::class_<bound_step<Args>>(m, type)
      .def("__call__", &bound_step<Args>::operator(), "values"_a, "stream"_a = nb::none(), "repeats"_a = 1);
  m.def(bind, [](const std::vector<int32_t>& per_call, const nb::args& all) { return bound_step<Args>(per_call, all); },
        "per_call"_a, "args"_a);
}

void run_commit(const nb::args& values, nb::handle stream) {
  arrays held;
  commit_args args;
  held.take(values, args);
  const uintptr_t on = held.stream_of(args.cursors, stream);
  run_on_device(
      args.cursors,
      [&] {
        rs::step_params p;
        if (rs::status s = commit_params(args, p); !s) return s;
        return rs::cpu::commit_drafts(p);
      },
      [&] { return cuda_commit_drafts(args, on); });
}

void run_take_step_errors(nb::handle report, nb::handle stream) {
  arrays held;
  const array a = held.convert("take_step_errors", report, "report", true);
  const uintptr_t on = held.stream_of(a, stream);
  run_on_device(
      a, [] { return rs::status{}; }, [&] { return cuda_take_step_errors(a, on); });
}

nb::dict sizes_dict(const rs::state_pool_sizes& s) {
  nb::dict d;
  d["checkpoint"] = s.checkpoint;
  d["checkpoint_scales"] = s.checkpoint_scales;
  d["read_copy"] = s.read_copy;
  d["read_copy_scales"] = s.read_copy_scales;
  return d;
}

nb::dict mamba2_buffers(int policy, const rs::mamba2_layer_shape& shape, int64_t num_slots, const std::string& dtype,
                        int32_t draft_tokens) {
  nb::dict d;
  visit(policies{}, policy, [&](auto t) {
    const auto s = rs::mamba2_buffers<typename decltype(t)::type>(shape, num_slots, dtype_of(dtype), draft_tokens);
    d = sizes_dict(s);
    d["window_x"] = s.window_x;
    d["window_B"] = s.window_B;
    d["window_dt"] = s.window_dt;
    d["cursors"] = s.cursors;
    d["total"] = s.total();
    return rs::status{};
  }).throw_if_error();
  return d;
}

nb::dict gdn_buffers(int policy, bool raw_inputs, const rs::gdn_layer_shape& shape, int64_t num_slots,
                     const std::string& dtype, int32_t draft_tokens) {
  nb::dict d;
  visit_gdn_policy(policy, raw_inputs, [&](auto t) {
    const auto s = rs::gdn_buffers<typename decltype(t)::type>(shape, num_slots, dtype_of(dtype), draft_tokens);
    d = sizes_dict(s);
    d["window_u"] = s.window_u;
    d["window_k"] = s.window_k;
    d["window_g"] = s.window_g;
    d["window_v"] = s.window_v;
    d["window_beta"] = s.window_beta;
    d["cursors"] = s.cursors;
    d["total"] = s.total();
    return rs::status{};
  }).throw_if_error();
  return d;
}

/// Encodes (`write`) or decodes the states of the heads in `values` (`[heads, rows, cols]`
/// floats, host memory) into or from state pools (bytes, host memory) that begin with those
/// heads, under the policy's formats: a Mamba-2 head is `head_dim x state_dim`, a Gated DeltaNet head
/// `value_dim x key_dim` (stored in the chunk order of `gdn_state_chunk`).
void state_io(bool write, const std::string& recurrence, int policy, nb::handle values_object, nb::handle checkpoint,
              nb::handle checkpoint_scales, nb::handle read_copy, nb::handle read_copy_scales) {
  const bool gdn = recurrence == "gated_deltanet";
  if (!gdn && recurrence != "mamba2") throw nb::value_error(("unknown recurrence '" + recurrence + "'").c_str());
  const char* who = write ? "write_state" : "read_state";
  arrays held;
  const array values = held.convert(who, values_object, "values", !write);
  checker c(who, device_type::cpu, 0);
  const int64_t any3[] = {-1, -1, -1};
  c.strided(values, element::f32, 3, any3, gdn ? "heads, value_dim, key_dim" : "heads, head_dim, state_dim");
  c.buffer(values, element::f32, 0, "");
  c.status().throw_if_error();
  const int64_t heads = values.shape[0], rows = values.shape[1], cols = values.shape[2];
  const int64_t max_cols = gdn ? rs::gdn_max_key_dim : rs::max_state_dim;
  if (cols % 16 != 0 || cols < 16 || cols > max_cols)
    c.fail(values, "its last dimension " + std::to_string(cols) + " must be a multiple of 16 in [16, " +
                       std::to_string(max_cols) + "]");
  c.status().throw_if_error();
  auto optional = [&](nb::handle h, const char* name) {
    return h.is_none() ? array{} : held.convert(who, h, name, write);
  };
  const array pools[] = {optional(checkpoint, "checkpoint"), optional(checkpoint_scales, "checkpoint_scales"),
                         optional(read_copy, "read_copy"), optional(read_copy_scales, "read_copy_scales")};
  visit(policies{}, policy, [&](auto t) {
    using Policy = typename decltype(t)::type;
    using ckpt = typename Policy::checkpoint_format;
    using read = typename Policy::read_format;
    const size_t elements = size_t(heads * rows * cols);
    const std::string needs = std::to_string(heads) + " heads of " + rs::describe<Policy>();
    c.buffer(pools[0], element::u8, rs::state_data_bytes<ckpt>(elements), needs);
    c.buffer(pools[1], element::u8, rs::state_scale_bytes<ckpt>(elements), needs, ckpt::scale_bytes_per_chunk == 0);
    if (write && !Policy::shared_state) {
      c.buffer(pools[2], element::u8, rs::state_data_bytes<read>(elements), needs);
      c.buffer(pools[3], element::u8, rs::state_scale_bytes<read>(elements), needs, read::scale_bytes_per_chunk == 0);
    }
    if (!c.status().ok()) return c.status();
    const float* in = static_cast<const float*>(values.data);
    for (int64_t h = 0; h < heads; ++h) {
      const auto ck = rs::state_head_view<ckpt>::in_pool(pools[0].data, pools[1].data, h, rows * cols);
      const auto rd = Policy::shared_state
                          ? rs::state_head_view<read>{}
                          : rs::state_head_view<read>::in_pool(pools[2].data, pools[3].data, h, rows * cols);
      float* head = static_cast<float*>(values.data) + h * rows * cols;
      const rs::mamba2_layer_shape m{1, int32_t(rows), int32_t(cols), 1};
      const rs::gdn_layer_shape g{1, 1, int32_t(cols), int32_t(rows)};
      if (write && gdn) rs::write_head_state<Policy>(rs::serial_executor{}, in + h * rows * cols, g, ck, rd);
      if (write && !gdn) rs::write_head_state<Policy>(rs::serial_executor{}, in + h * rows * cols, m, ck, rd);
      if (!write && gdn) rs::read_head_state(rs::serial_executor{}, ck, g, head);
      if (!write && !gdn) rs::read_head_state(rs::serial_executor{}, ck, m, head);
    }
    return rs::status{};
  }).throw_if_error();
}

/// What Python needs to know of each compiled-in policy; `cuda`: whether the module has its
/// CUDA steps.
nb::list policy_list() {
#ifdef REPLAYSSM_PYTHON_CUDA
  const int cuda_steps = type_count(cuda_policies{});
#else
  const int cuda_steps = 0;
#endif
  nb::list list;
  auto add = [&](auto t) {
    using P = typename decltype(t)::type;
    nb::dict d;
    d["window"] = P::window;
    d["read"] = P::read_format::name;
    d["checkpoint"] = P::checkpoint_format::name;
    d["rounding"] = P::rounding::is_stochastic ? "stochastic" : "nearest-even";
    d["description"] = rs::describe<P>();
    d["cuda"] = int(nb::len(list)) < cuda_steps;
    list.append(d);
  };
  for_each_type(policies{}, add);
  return list;
}

}  // namespace

#ifndef REPLAYSSM_PYTHON_CUDA
// Built without nvcc: the CUDA steps say so.
static rs::status no_cuda(const array& a) {
  return rs::status::error(std::string("replayssm: ") + a.name +
                           " is on a CUDA device, but this module was built without CUDA (no nvcc at build time)");
}
rs::status cuda_mamba2_step(const step_call&, const mamba2_args& args) {
  return no_cuda(args.x);
}
rs::status cuda_gdn_step(const step_call&, const gdn_args& args) {
  return no_cuda(args.first());
}
rs::status cuda_commit_drafts(const commit_args& args, uintptr_t) {
  return no_cuda(args.cursors);
}
rs::status cuda_take_step_errors(const array& report, uintptr_t) {
  return no_cuda(report);
}
#endif

}  // namespace replayssm_python

NB_MODULE(_native, m) {
  using namespace replayssm_python;
  m.doc() = "The native part of replayssm (use the replayssm package).";
  m.def("policies", &policy_list);
  m.def(
      "mamba2_buffers",
      [](int policy, int32_t heads, int32_t head_dim, int32_t state_dim, int32_t groups, int64_t num_slots,
         const std::string& dtype, int32_t draft_tokens) {
        return mamba2_buffers(policy, {heads, head_dim, state_dim, groups}, num_slots, dtype, draft_tokens);
      },
      "policy"_a, "heads"_a, "head_dim"_a, "state_dim"_a, "groups"_a, "num_slots"_a, "dtype"_a, "draft_tokens"_a);
  m.def(
      "gdn_buffers",
      [](int policy, bool raw_inputs, int32_t value_heads, int32_t key_heads, int32_t key_dim, int32_t value_dim,
         int64_t num_slots, const std::string& dtype, int32_t draft_tokens) {
        return gdn_buffers(policy, raw_inputs, {value_heads, key_heads, key_dim, value_dim}, num_slots, dtype,
                           draft_tokens);
      },
      "policy"_a, "raw_inputs"_a, "value_heads"_a, "key_heads"_a, "key_dim"_a, "value_dim"_a, "num_slots"_a, "dtype"_a,
      "draft_tokens"_a);
  m.def(
      "mamba2_bytes_per_step",
      [](int policy, int32_t heads, int32_t head_dim, int32_t state_dim, int32_t groups, int64_t batch,
         const std::string& dtype) {
        double bytes = 0;
        visit(policies{}, policy, [&](auto t) {
          bytes = rs::mamba2_bytes_per_step<typename decltype(t)::type>({heads, head_dim, state_dim, groups}, batch,
                                                                        dtype_of(dtype));
          return rs::status{};
        }).throw_if_error();
        return bytes;
      },
      "policy"_a, "heads"_a, "head_dim"_a, "state_dim"_a, "groups"_a, "batch"_a, "dtype"_a);
  m.def(
      "gdn_bytes_per_step",
      [](int policy, bool raw_inputs, int32_t value_heads, int32_t key_heads, int32_t key_dim, int32_t value_dim,
         int64_t batch, const std::string& dtype) {
        double bytes = 0;
        visit_gdn_policy(policy, raw_inputs, [&](auto t) {
          bytes = rs::gdn_bytes_per_step<typename decltype(t)::type>({value_heads, key_heads, key_dim, value_dim},
                                                                     batch, dtype_of(dtype));
          return rs::status{};
        }).throw_if_error();
        return bytes;
      },
      "policy"_a, "raw_inputs"_a, "value_heads"_a, "key_heads"_a, "key_dim"_a, "value_dim"_a, "batch"_a, "dtype"_a);
  // A step's arguments are positional, in the order `step_fields` lists the params' fields
  // (steps.hpp); `stream` (keyword) None: the current stream of the arrays' framework.
  m.def("mamba2_step", &run_positional<mamba2_args>, "args"_a, "stream"_a = nb::none(), "repeats"_a = 1);
  m.def("gdn_step", &run_positional<gdn_args>, "args"_a, "stream"_a = nb::none(), "repeats"_a = 1);
  // The same with a layer's arguments bound once: bind_*(per_call, *args), then call the
  // bound step with the per-call arguments.
  def_bound_step<mamba2_args>(m, "bind_mamba2_step", "BoundMamba2Step");
  def_bound_step<gdn_args>(m, "bind_gdn_step", "BoundGDNStep");
  m.def("commit_drafts", &run_commit, "args"_a, "stream"_a = nb::none());
  nb::dict fields;
  fields["mamba2_step"] = step_fields<mamba2_args>();
  fields["gdn_step"] = step_fields<gdn_args>();
  fields["commit_drafts"] = step_fields<commit_args>();
  m.attr("step_fields") = fields;
  m.def("take_step_errors", &run_take_step_errors, "report"_a, "stream"_a = nb::none());
  m.def(
      "write_state",
      [](const std::string& recurrence, int policy, nb::handle values, nb::handle checkpoint,
         nb::handle checkpoint_scales, nb::handle read_copy, nb::handle read_copy_scales) {
        state_io(true, recurrence, policy, values, checkpoint, checkpoint_scales, read_copy, read_copy_scales);
      },
      "recurrence"_a, "policy"_a, "values"_a, "checkpoint"_a, "checkpoint_scales"_a.none(), "read_copy"_a.none(),
      "read_copy_scales"_a.none());
  m.def(
      "read_state",
      [](const std::string& recurrence, int policy, nb::handle values, nb::handle checkpoint,
         nb::handle checkpoint_scales) {
        state_io(false, recurrence, policy, values, checkpoint, checkpoint_scales, nb::none(), nb::none());
      },
      "recurrence"_a, "policy"_a, "values"_a, "checkpoint"_a, "checkpoint_scales"_a.none());
#ifdef REPLAYSSM_PYTHON_CUDA
  m.attr("cuda") = true;
#else
  m.attr("cuda") = false;
#endif
}
