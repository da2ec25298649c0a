// SPDX-License-Identifier: Apache-2.0
// The examples' command-line parser. Each option is declared with where its value goes and
// what it accepts: an integer or a real number in a closed range (the whole argument must be
// the number: "5x", "abc", "" and out-of-range values are errors), one of a list of
// choices, a non-empty text, or a flag. `--name value` and `--name=value` are both accepted.
//
//   args::parser cli("decode_loop", usage_text);
//   cli.integer("--steps", o.steps, 1, 1 << 20);
//   cli.choice("--device", o.device, {"cpu", "cuda"});
//   if (const int code = cli.parse(argc, argv); code != args::proceed) return code;
//
// `--help` (or `-h`) prints the usage on stdout and parse returns 0. An unknown argument or
// a bad value prints an error naming the argument (and the accepted range or choices) on
// stderr and parse returns 2; so does `cli.error(...)`, for the checks across options that
// an example makes after parsing.
#pragma once

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__CUDACC__)
#include <cuda_runtime.h>
#endif

namespace replayssm_example::args {

/// What parse returns when the program should go on (else it is the exit code).
constexpr int proceed = -1;
/// The exit code of a usage error.
constexpr int usage_error = 2;

/// `text` as a whole as a T (an integer or floating-point type); false when it is not one
/// (empty, trailing characters, a sign on an unsigned type, out of T's range, or not finite).
template <class T>
bool parse_number(const std::string& text, T& out) {
  const char* first = text.data();
  const char* last = first + text.size();
  if (first != last && *first == '+') ++first;  // from_chars takes no plus sign
  if (first == last) return false;
  T value{};
  const auto [end, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || end != last) return false;
  if constexpr (std::is_floating_point_v<T>) {
    if (!std::isfinite(value)) return false;
  }
  out = value;
  return true;
}

/// The decimal text of a number as the error messages show it (integers exactly, reals with
/// up to 6 significant digits).
template <class T>
std::string show(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", double(v));
    return buf;
  } else {
    return std::to_string(v);
  }
}

class parser {
 public:
  /// `program`: the name in messages; `usage`: the text --help prints (ending in a newline).
  parser(std::string program, std::string usage) : program_(std::move(program)), usage_(std::move(usage)) {}
  parser(const parser&) = delete;
  parser& operator=(const parser&) = delete;

  /// An integer option in [lo, hi].
  template <class T>
  void integer(const char* name, T& out, T lo, T hi) {
    static_assert(std::is_integral_v<T>, "integer options are of an integer type");
    add(name, true, [&out, lo, hi](const std::string& text) {
      T v{};
      if (!parse_number(text, v) || v < lo || v > hi)
        return "expected an integer in [" + show(lo) + ", " + show(hi) + "]";
      out = v;
      return std::string();
    });
  }
  /// A real-number option in [lo, hi] (finite).
  template <class T>
  void real(const char* name, T& out, T lo, T hi) {
    static_assert(std::is_floating_point_v<T>, "real options are of a floating-point type");
    add(name, true, [&out, lo, hi](const std::string& text) {
      T v{};
      if (!parse_number(text, v) || !(v >= lo && v <= hi))
        return "expected a number in [" + show(lo) + ", " + show(hi) + "]";
      out = v;
      return std::string();
    });
  }
  /// An option whose value is one of `choices`.
  void choice(const char* name, std::string& out, std::vector<std::string> choices) {
    add(name, true, [&out, choices = std::move(choices)](const std::string& text) {
      for (const auto& c : choices)
        if (c == text) {
          out = text;
          return std::string();
        }
      std::string list;
      for (const auto& c : choices) list += (list.empty() ? "" : "|") + c;
      return "expected one of " + list;
    });
  }
  /// An option with any non-empty text (a path, say).
  void text(const char* name, std::string& out) {
    add(name, true, [&out](const std::string& text) {
      if (text.empty()) return std::string("expected a non-empty value");
      out = text;
      return std::string();
    });
  }
  /// A flag: present or not, no value.
  void flag(const char* name, bool& out) {
    add(name, false, [&out](const std::string&) {
      out = true;
      return std::string();
    });
  }

  /// Parses argv[1, argc): `proceed`, or the exit code (0 after --help, 2 after an error,
  /// both printed).
  int parse(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
      std::string arg = argv[i];
      if (arg == "--help" || arg == "-h") {
        std::fputs(usage_.c_str(), stdout);
        return 0;
      }
      std::string value;
      bool inline_value = false;
      if (const size_t eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
        value = arg.substr(eq + 1);
        arg.resize(eq);
        inline_value = true;
      }
      const option* o = find(arg);
      if (o == nullptr) return error("unknown argument '" + std::string(argv[i]) + "'");
      if (!o->takes_value) {
        if (inline_value) return error(arg + ": takes no value");
      } else if (!inline_value) {
        if (i + 1 >= argc) return error(arg + ": missing value");
        value = argv[++i];
      }
      if (const std::string why = o->set(value); !why.empty())
        return error(arg + ": " + why + ", got '" + value + "'");
      given_.push_back(arg);
    }
    return proceed;
  }

  /// Whether the command line set option `name`.
  bool given(const std::string& name) const {
    for (const auto& g : given_)
      if (g == name) return true;
    return false;
  }

  /// Prints "<program>: <message>" and a pointer to --help on stderr; returns 2.
  int error(const std::string& message) const {
    std::fprintf(stderr, "%s: %s\n(run '%s --help' for usage)\n", program_.c_str(), message.c_str(),
                 program_.c_str());
    return usage_error;
  }

  /// Checks, before any work, that option `name`'s file `path` can be written: it is
  /// created (or opened for appending, leaving an existing file as it is). Returns
  /// `proceed`, or 2 after printing why not.
  int check_writable_file(const char* name, const std::string& path) const {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::is_directory(path, ec)) return error(std::string(name) + ": '" + path + "' is a directory");
    const bool existed = fs::exists(path, ec);
    std::ofstream f(path, std::ios::app);
    if (!f) return error(std::string(name) + ": cannot write '" + path + "': " + std::strerror(errno));
    f.close();
    if (!existed) fs::remove(path, ec);
    return proceed;
  }

  /// Checks, before any work, that option `name`'s directory `path` exists or can be
  /// created, and that a file can be written in it. Returns `proceed`, or 2 after printing
  /// why not.
  int check_writable_directory(const char* name, const std::string& path) const {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(path, ec) && !fs::is_directory(path, ec))
      return error(std::string(name) + ": '" + path + "' exists and is not a directory");
    fs::create_directories(path, ec);
    if (ec) return error(std::string(name) + ": cannot create directory '" + path + "': " + ec.message());
    const fs::path probe = fs::path(path) / ".write_probe";
    std::ofstream f(probe);
    if (!f) return error(std::string(name) + ": cannot write in directory '" + path + "': " + std::strerror(errno));
    f.close();
    fs::remove(probe, ec);
    return proceed;
  }

  /// Checks that `--device` value `device` ("cpu" or "cuda") can run here: "cuda" needs a
  /// build by a CUDA compiler and a device. Returns `proceed`, or 2 after printing why not.
  int check_device(const std::string& device) const {
    if (device != "cuda") return proceed;
#if defined(__CUDACC__)
    // Without a device the runtime may answer "driver version is insufficient" (no driver
    // at all): not what a user needs to hear.
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      cudaGetLastError();  // clear the error of the failed query
      return error("--device cuda: no CUDA device is present; use --device cpu");
    }
    return proceed;
#else
    return error("--device cuda: this build has no CUDA support (rebuild with nvcc available); use --device cpu");
#endif
  }

 private:
  struct option {
    std::string name;
    bool takes_value;
    std::function<std::string(const std::string&)> set;  // "" when accepted, else why not
  };
  void add(const char* name, bool takes_value, std::function<std::string(const std::string&)> set) {
    options_.push_back({name, takes_value, std::move(set)});
  }
  const option* find(const std::string& name) const {
    for (const auto& o : options_)
      if (o.name == name) return &o;
    return nullptr;
  }

  std::string program_, usage_;
  std::vector<option> options_;
  std::vector<std::string> given_;
};

}  // namespace replayssm_example::args
