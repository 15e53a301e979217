#pragma once
// A Tensor is a named, shaped view into memory owned by an Arena. It never owns memory.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace hw {

enum class DType : uint8_t { F32, BF16, I32, U16, F64, F16 };
enum class Device : uint8_t { CPU, CUDA };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // safetensors spelling: F32, BF16, I32, U16, F64, F16
// The dtype that stores F (float -> F32, double -> F64, hw::bf16 (core/bf16.hpp) -> BF16).
template <class F>
constexpr DType dtype_of() {
  return sizeof(F) == 8 ? DType::F64 : sizeof(F) == 2 ? DType::BF16 : DType::F32;
}

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  Device device = Device::CPU;
  void* data = nullptr;  // set when the owning arena allocates

  // Both throw hw::Error naming the tensor when the product overflows (or a dimension is negative).
  int64_t numel() const;
  size_t nbytes() const;
  int64_t dim(int i) const { return shape.at(static_cast<size_t>(i < 0 ? i + static_cast<int>(shape.size()) : i)); }
  int rank() const { return static_cast<int>(shape.size()); }
  std::string shape_str() const;

  float* f32() { return static_cast<float*>(data); }
  const float* f32() const { return static_cast<const float*>(data); }
  int32_t* i32() { return static_cast<int32_t*>(data); }
  const int32_t* i32() const { return static_cast<const int32_t*>(data); }
  template <class F>
  F* as() { return static_cast<F*>(data); }
  template <class F>
  const F* as() const { return static_cast<const F*>(data); }
};

}  // namespace hw
