#pragma once
// Host access to memory that lives in a backend's device memory (model arenas, optimizer
// moments): every read or write goes through a host vector and the backend's blocking
// copy_to_host / copy_to_device, so the same code runs whether the memory is the CPU's or a
// GPU's. Used outside the training step only (init, checkpoints, plan changes, calibration).
#include <cstdint>
#include <vector>

#include "headwise/kernels/backend.hpp"

namespace hw {

// n elements at `src` (backend memory) into `host` (resized to n).
template <class T, class F>
void read_device(const Backend<F>& ops, const T* src, int64_t n, std::vector<T>& host) {
  host.resize(static_cast<size_t>(n));
  ops.copy_to_host(host.data(), src, sizeof(T) * static_cast<size_t>(n));
}

template <class T, class F>
std::vector<T> read_device(const Backend<F>& ops, const T* src, int64_t n) {
  std::vector<T> host;
  read_device(ops, src, n, host);
  return host;
}

// n host elements into backend memory at `dst`.
template <class T, class F>
void write_device(const Backend<F>& ops, T* dst, const T* host, int64_t n) {
  ops.copy_to_device(dst, host, sizeof(T) * static_cast<size_t>(n));
}

template <class T, class F>
void write_device(const Backend<F>& ops, T* dst, const std::vector<T>& host) {
  write_device(ops, dst, host.data(), static_cast<int64_t>(host.size()));
}

}  // namespace hw
