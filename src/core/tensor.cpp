#include "headwise/core/tensor.hpp"

#include "headwise/core/checked_math.hpp"
#include "headwise/core/error.hpp"

namespace hw {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::I32: return 4;
    case DType::BF16: return 2;
    case DType::U16: return 2;
    case DType::F64: return 8;
    case DType::F16: return 2;
  }
  fail("unknown dtype");
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "F32";
    case DType::I32: return "I32";
    case DType::BF16: return "BF16";
    case DType::U16: return "U16";
    case DType::F64: return "F64";
    case DType::F16: return "F16";
  }
  fail("unknown dtype");
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) fail("tensor '" + name + "' of shape " + shape_str() + " is too large");
  return n;
}

size_t Tensor::nbytes() const {
  size_t n = 0;
  if (__builtin_mul_overflow(size_t(numel()), dtype_size(dtype), &n) || n > size_t(INT64_MAX))
    fail("tensor '" + name + "' of shape " + shape_str() + " is too large");
  return n;
}

std::string Tensor::shape_str() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace hw
