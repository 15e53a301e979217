#include "headwise/core/arena.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "headwise/core/checked_math.hpp"
#include "headwise/core/device_memory.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/host_pages.hpp"

namespace hw {

namespace {
// Live and peak bytes per device (index: Device).
std::atomic<size_t> g_live[2] = {0, 0};
std::atomic<size_t> g_peak[2] = {0, 0};
// Host slices are cache-line aligned; device slices 256-byte aligned (cuBLASLt and vectorised
// kernels want at least 16).
size_t align_of(Device d) { return d == Device::CPU ? 64 : 256; }
size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }  // n <= SIZE_MAX - a (nbytes() <= 2^63)
}  // namespace

size_t arena_peak_bytes(Device d) { return g_peak[size_t(d)].load(); }
size_t arena_live_bytes(Device d) { return g_live[size_t(d)].load(); }

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
  (void)t->nbytes();  // a shape whose byte size overflows is refused here, naming the tensor
  tensors_.push_back(std::move(t));
  return tensors_.back().get();
}

void Arena::allocate() {
  check(!allocated(), "arena '" + role_ + "' allocated twice");
  const size_t align = align_of(device_);
  size_t total = 0;
  const std::string what = "arena '" + role_ + "'";
  for (auto& t : tensors_) total = checked_add(total, round_up(t->nbytes(), align), what.c_str());
  total = std::max(total, align);
  if (device_ == Device::CPU) {
    // Anonymous pages read as zero and take no memory until written: a tensor nobody fills (a
    // matrix loaded straight into 16 bits, say) costs nothing, and discard() can give pages back.
    // (Large arenas on 2 MiB pages where the kernel allows: host_pages.hpp.)
    void* p = map_host_pages(total);
    check(p != nullptr, "arena '" + role_ + "': out of memory allocating " + std::to_string(total) + " bytes");
    base_ = p;
  } else {
    base_ = device::alloc(total, "arena '" + role_ + "'");
    device::zero(base_, total);
  }
  bytes_ = total;
  size_t off = 0;
  for (auto& t : tensors_) {
    t->data = static_cast<char*>(base_) + off;
    off += round_up(t->nbytes(), align);
  }
  auto& live_bytes = g_live[size_t(device_)];
  auto& peak_bytes = g_peak[size_t(device_)];
  size_t live = live_bytes.fetch_add(total) + total;
  size_t peak = peak_bytes.load();
  while (live > peak && !peak_bytes.compare_exchange_weak(peak, live)) {
  }
}

void Arena::reset() {
  if (base_) {
    if (device_ == Device::CPU)
      unmap_host_pages(base_, bytes_);
    else
      device::free(base_);
    g_live[size_t(device_)].fetch_sub(bytes_);
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

void Arena::discard(const Tensor& t) {
  check(device_ == Device::CPU && base_ != nullptr && t.data >= base_ &&
            static_cast<const char*>(t.data) + t.nbytes() <= static_cast<const char*>(base_) + bytes_,
        "arena '" + role_ + "': discard of '" + t.name + "', which is not a tensor of this allocated CPU arena");
  discard_bytes(t.data, t.nbytes());
}

void Arena::discard_bytes(void* p, size_t n) {
  char* a = static_cast<char*>(p);
  char* e = a + n;
  check(device_ == Device::CPU && base_ != nullptr && a >= static_cast<char*>(base_) &&
            e <= static_cast<char*>(base_) + bytes_,
        "arena '" + role_ + "': discard of bytes outside its allocated CPU block");
  const auto page = uintptr_t(sysconf(_SC_PAGESIZE));
  char* pa = reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(a) + page - 1) / page * page);
  char* pe = reinterpret_cast<char*>(reinterpret_cast<uintptr_t>(e) / page * page);
  if (pa >= pe) {  // within one or two pages shared with neighbours: just zero
    std::memset(a, 0, size_t(e - a));
    return;
  }
  std::memset(a, 0, size_t(pa - a));  // the partial pages at both ends stay (neighbours use them)
  std::memset(pe, 0, size_t(e - pe));
  // Whole pages of a private anonymous mapping: dropped, and read as zeros again.
  check(madvise(pa, size_t(pe - pa), MADV_DONTNEED) == 0, "arena '" + role_ + "': madvise failed");
}

void Arena::swap(Arena& other) {
  check(device_ == other.device_, "arena '" + role_ + "': swap with an arena of another device");
  std::swap(tensors_, other.tensors_);
  std::swap(base_, other.base_);
  std::swap(bytes_, other.bytes_);
}

void Arena::zero() {
  if (!base_) return;
  if (device_ == Device::CPU)
    std::memset(base_, 0, bytes_);
  else
    device::zero(base_, bytes_);
}

}  // namespace hw
