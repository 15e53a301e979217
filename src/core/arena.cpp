#include "headwise/core/arena.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "headwise/core/error.hpp"

namespace hw {

namespace {
std::atomic<size_t> g_live{0};
std::atomic<size_t> g_peak{0};
constexpr size_t kAlign = 64;
size_t round_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

size_t arena_peak_bytes() { return g_peak.load(); }
size_t arena_live_bytes() { return g_live.load(); }

Arena::Arena(std::string role, Device device) : role_(std::move(role)), device_(device) {}

Arena::~Arena() { reset(); }

Tensor* Arena::declare(const std::string& name, std::vector<int64_t> shape, DType dtype) {
  check(!allocated(), "arena '" + role_ + "': cannot declare '" + name + "' after allocation");
  check(find(name) == nullptr, "arena '" + role_ + "': tensor '" + name + "' declared twice");
  for (int64_t d : shape) check(d >= 0, "arena '" + role_ + "': tensor '" + name + "' has a negative dimension");
  auto t = std::make_unique<Tensor>();
  t->name = name;
  t->shape = std::move(shape);
  t->dtype = dtype;
  t->device = device_;
  tensors_.push_back(std::move(t));
  return tensors_.back().get();
}

void Arena::allocate() {
  check(!allocated(), "arena '" + role_ + "' allocated twice");
  check(device_ == Device::CPU, "arena '" + role_ + "': CUDA arenas are allocated by the CUDA backend");
  size_t total = 0;
  for (auto& t : tensors_) total += round_up(t->nbytes());
  total = std::max(total, kAlign);
  base_ = std::aligned_alloc(kAlign, total);
  check(base_ != nullptr, "arena '" + role_ + "': out of memory allocating " + std::to_string(total) + " bytes");
  std::memset(base_, 0, total);
  bytes_ = total;
  size_t off = 0;
  for (auto& t : tensors_) {
    t->data = static_cast<char*>(base_) + off;
    off += round_up(t->nbytes());
  }
  size_t live = g_live.fetch_add(total) + total;
  size_t peak = g_peak.load();
  while (live > peak && !g_peak.compare_exchange_weak(peak, live)) {
  }
}

void Arena::reset() {
  if (base_) {
    std::free(base_);
    g_live.fetch_sub(bytes_);
  }
  base_ = nullptr;
  bytes_ = 0;
  tensors_.clear();
}

Tensor* Arena::find(const std::string& name) {
  for (auto& t : tensors_)
    if (t->name == name) return t.get();
  return nullptr;
}

const Tensor* Arena::find(const std::string& name) const {
  for (auto& t : tensors_)
    if (t->name == name) return t.get();
  return nullptr;
}

Tensor& Arena::get(const std::string& name) {
  Tensor* t = find(name);
  check(t != nullptr, "arena '" + role_ + "' has no tensor '" + name + "'");
  return *t;
}

int64_t Arena::numel() const {
  int64_t n = 0;
  for (auto& t : tensors_) n += t->numel();
  return n;
}

void Arena::zero() {
  if (base_) std::memset(base_, 0, bytes_);
}

}  // namespace hw
