#pragma once
// An Arena owns one contiguous allocation for one role (parameters, gradients, optimizer
// state, activations, buffers). Tensors are declared by name first, then allocated together
// once, before the first training step. Declared tensors have stable addresses, so owners
// keep `Tensor*` members and never look tensors up by index.
#include <memory>
#include <string>
#include <vector>

#include "headwise/core/tensor.hpp"

namespace hw {

class Arena {
 public:
  explicit Arena(std::string role, Device device = Device::CPU);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // Declare a tensor; only valid before allocate(). Names are unique within the arena.
  Tensor* declare(const std::string& name, std::vector<int64_t> shape, DType dtype = DType::F32);
  // Allocate every declared tensor in one block (64-byte aligned slices on the host, 256 on a
  // GPU) and zero it. Host memory is mapped on demand: a page costs memory once written.
  void allocate();
  // Host arenas: tensor t (of this arena) reads as zeros again and its whole pages go back to
  // the system until written (a matrix that lives on elsewhere, e.g. the decoder's 16-bit copy).
  void discard(const Tensor& t);
  // The same for the bytes [p, p + n) inside the block: its whole pages go back, the partial
  // pages at both ends are zeroed (a tensor that is consumed piece by piece, then dropped).
  void discard_bytes(void* p, size_t n);
  // Exchange tensors and memory with another arena of the same device (names stay): a plan
  // change keeps the old block alive beside the new one without copying it.
  void swap(Arena& other);
  // Drop all tensors and memory (used when a head plan changes the layout between steps).
  void reset();

  bool allocated() const { return base_ != nullptr; }
  Tensor* find(const std::string& name);
  const Tensor* find(const std::string& name) const;
  Tensor& get(const std::string& name);  // throws hw::Error naming the missing tensor
  const std::vector<std::unique_ptr<Tensor>>& tensors() const { return tensors_; }
  size_t bytes() const { return bytes_; }
  // The whole block (tensors plus alignment padding, which stays zero): collectives such as
  // the gradient all-reduce work on it in one call.
  void* base() { return base_; }
  const void* base() const { return base_; }
  // Offset of a tensor of this arena from base(), in bytes.
  size_t offset_of(const Tensor& t) const { return size_t(static_cast<const char*>(t.data) - static_cast<const char*>(base_)); }
  int64_t numel() const;
  const std::string& role() const { return role_; }
  Device device() const { return device_; }
  void zero();

 private:
  std::string role_;
  Device device_;
  std::vector<std::unique_ptr<Tensor>> tensors_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

// Peak bytes over every arena of a device ever allocated in this process (reported by
// train/bench), and the bytes allocated now.
size_t arena_peak_bytes(Device device = Device::CPU);
size_t arena_live_bytes(Device device = Device::CPU);

}  // namespace hw
