#pragma once
// Size arithmetic on values that come from files, configs and the command line: an overflow is
// an error naming what was being sized, never a wrapped (small or negative) size that would
// then be allocated or indexed with.
#include <cstdint>
#include <string>

#include "headwise/core/error.hpp"

namespace hw {

// a * b and a + b for sizes (both >= 0); throws hw::Error "<what>: size overflows" otherwise.
inline int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r)) fail(std::string(what) + ": size overflows 64 bits");
  return r;
}

inline int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r)) fail(std::string(what) + ": size overflows 64 bits");
  return r;
}

inline size_t checked_mul(size_t a, size_t b, const char* what) {
  size_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) fail(std::string(what) + ": size overflows 64 bits");
  return r;
}

inline size_t checked_add(size_t a, size_t b, const char* what) {
  size_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) fail(std::string(what) + ": size overflows 64 bits");
  return r;
}

}  // namespace hw
