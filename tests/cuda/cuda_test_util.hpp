#pragma once
// Shared pieces of the CUDA parity tests: device arrays that free themselves, upload and
// download through a backend (its copies are ordered on its stream), seeded random inputs,
// the CPU double-precision reference run on the same inputs, and the error measure; for the
// mixed-precision ops, the same pieces with bf16 device arrays.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "headwise/core/bf16.hpp"
#include "headwise/core/device_memory.hpp"
#include "headwise/kernels/backend.hpp"
#include "support/rel_err.hpp"
#include "headwise/kernels/cuda_backend.hpp"

namespace hw::cudatest {

// n elements of T in GPU memory (at least one element is allocated, so size 0 is valid).
template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(int64_t n)
      : n_(n), ptr_(static_cast<T*>(device::alloc(sizeof(T) * static_cast<size_t>(std::max<int64_t>(n, 1)),
                                                  "test array"))) {}
  ~DeviceArray() { device::free(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return ptr_; }
  int64_t size() const { return n_; }
  size_t bytes() const { return sizeof(T) * static_cast<size_t>(n_); }

 private:
  int64_t n_;
  T* ptr_;
};

template <class T>
std::unique_ptr<DeviceArray<T>> upload(const Backend<float>& be, const std::vector<T>& host) {
  auto d = std::make_unique<DeviceArray<T>>(static_cast<int64_t>(host.size()));
  be.copy_to_device(d->get(), host.data(), d->bytes());
  return d;
}

template <class T>
std::vector<T> download(const Backend<float>& be, const DeviceArray<T>& d) {
  std::vector<T> host(static_cast<size_t>(d.size()));
  be.copy_to_host(host.data(), d.get(), d.bytes());
  return host;
}

// Uniform in [lo, hi) from a fixed seed (a fresh generator per call: each input reproducible).
inline std::vector<float> random_vector(int64_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

using hw::test::max_rel_err;

// One float array on the GPU and its double twin for the CPU reference, starting equal:
// run the op on d() with the CUDA backend and on r() with reference(), then compare.
struct Twin {
  std::vector<double> ref;
  std::unique_ptr<DeviceArray<float>> dev;
  Twin(const Backend<float>& be, const std::vector<float>& host) : ref(to_double(host)), dev(upload(be, host)) {}
  float* d() const { return dev->get(); }
  double* r() { return ref.data(); }
  std::vector<float> got(const Backend<float>& be) const { return download(be, *dev); }
  double err(const Backend<float>& be) const { return max_rel_err(got(be), ref); }
};

// The values v takes once rounded to bf16 (to nearest even), as floats: give these to the CPU
// reference so it sees exactly the numbers a bf16 upload of v holds on the GPU.
inline std::vector<float> round_to_bf16_values(const std::vector<float>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); i++) out[i] = to_float(to_bf16(v[i]));
  return out;
}

// v rounded to bf16 (to nearest even) in a new device array.
inline std::unique_ptr<DeviceArray<bf16>> upload_bf16(const Backend<float>& be, const std::vector<float>& v) {
  std::vector<bf16> host(v.size());
  for (size_t i = 0; i < v.size(); i++) host[i] = to_bf16(v[i]);
  return upload(be, host);
}

// A bf16 device array widened to floats (exact).
inline std::vector<float> download_bf16(const Backend<float>& be, const DeviceArray<bf16>& d) {
  const std::vector<bf16> host = download(be, d);
  std::vector<float> out(host.size());
  for (size_t i = 0; i < host.size(); i++) out[i] = to_float(host[i]);
  return out;
}

// Twin for a bf16 array: the device holds v rounded to bf16, the reference the same values in
// double.
struct Bf16Twin {
  std::vector<double> ref;
  std::unique_ptr<DeviceArray<bf16>> dev;
  Bf16Twin(const Backend<float>& be, const std::vector<float>& host)
      : ref(to_double(round_to_bf16_values(host))), dev(upload_bf16(be, host)) {}
  bf16* d() const { return dev->get(); }
  double* r() { return ref.data(); }
  std::vector<float> got(const Backend<float>& be) const { return download_bf16(be, *dev); }
  double err(const Backend<float>& be) const { return max_rel_err(got(be), ref); }
};

// The exact-fp32 CUDA backend the parity tests share (one stream and cuBLASLt handle).
inline const Backend<float>& exact_backend() {
  static const std::unique_ptr<Backend<float>> be = make_cuda_backend({.tf32 = false});
  return *be;
}

// The reference: the CPU backend in double on the same (float) inputs.
inline const Backend<double>& reference() { return cpu_backend<double>(); }

}  // namespace hw::cudatest
