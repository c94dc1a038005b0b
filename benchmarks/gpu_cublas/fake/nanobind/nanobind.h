// Minimal stand-in for nanobind so GpuBlas.cpp builds without Python (harness
// only).
#pragma once
#include <cstdint>
namespace nanobind {
struct arg {
  arg(const char *) {}
  template <class T> arg &operator=(const T &) { return *this; }
};
struct module_ {
  template <class... A> void def(A &&...) {}
};
struct dict {
  struct proxy {
    template <class T> void operator=(const T &) {}
  };
  proxy operator[](const char *) { return {}; }
};
} // namespace nanobind
