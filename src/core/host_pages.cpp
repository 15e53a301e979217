#include "headwise/core/host_pages.hpp"

#include <sys/mman.h>

#include <cstdint>

namespace hw {

namespace {
constexpr size_t kHuge = size_t(2) << 20;
size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
}  // namespace

void* map_host_pages(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (bytes < kHuge) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  // Map 2 MiB more, keep the 2 MiB-aligned middle, give the ends back.
  const size_t len = round_up(bytes, kHuge);
  if (len > SIZE_MAX - kHuge) return nullptr;
  void* raw = mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const auto r = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t a = round_up(r, kHuge);
  if (a > r) munmap(raw, a - r);
  if (a + len < r + len + kHuge) munmap(reinterpret_cast<void*>(a + len), r + len + kHuge - (a + len));
  void* p = reinterpret_cast<void*>(a);
  // Advice (where the kernel has no THP, 4 KiB pages serve), for the whole 2 MiB blocks only: a
  // huge page at the end would make the unused rest of its 2 MiB resident on first touch.
  (void)madvise(p, bytes / kHuge * kHuge, MADV_HUGEPAGE);
  return p;
}

void advise_huge_pages(void* p, size_t bytes) {
  const auto b = reinterpret_cast<uintptr_t>(p);
  const uintptr_t lo = round_up(b, kHuge), hi = (b + bytes) / kHuge * kHuge;
  if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
}

void unmap_host_pages(void* p, size_t bytes) {
  if (!p) return;
  if (bytes == 0) bytes = 1;
  munmap(p, bytes < kHuge ? bytes : round_up(bytes, kHuge));
}

}  // namespace hw
