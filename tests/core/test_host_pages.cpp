// Host mappings for streamed buffers (core/host_pages.hpp): 2 MiB aligned, zero, writable, and
// eligible for transparent huge pages (read back from the kernel's own /proc/self/smaps, not from
// our code). Where the kernel's THP mode cannot show eligibility the THP cases report a skip.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "headwise/core/host_pages.hpp"
#include "support/skip.hpp"

namespace {

std::string thp_mode() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(in, s);
  return s;  // e.g. "always [madvise] never"
}

// The THPeligible field of the /proc/self/smaps entry whose range holds p (-1: not found).
int thp_eligible(const void* p) {
  std::ifstream in("/proc/self/smaps");
  std::string line;
  bool inside = false;
  const auto a = reinterpret_cast<uintptr_t>(p);
  while (std::getline(in, line)) {
    unsigned long lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = a >= lo && a < hi;
      continue;
    }
    if (inside && line.rfind("THPeligible:", 0) == 0) return std::stoi(line.substr(12));
  }
  return -1;
}

}  // namespace

TEST_CASE("host pages: large mappings are 2 MiB aligned, zero and writable", "[core][memory]") {
  const size_t bytes = (size_t(5) << 20) + 123;
  auto* p = static_cast<unsigned char*>(hw::map_host_pages(bytes));
  REQUIRE(p != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(p) % (size_t(2) << 20) == 0);
  bool zero = true;
  for (size_t i = 0; i < bytes; i += 4093) zero = zero && p[i] == 0;
  CHECK(zero);
  std::memset(p, 7, bytes);
  CHECK(p[bytes - 1] == 7);
  hw::unmap_host_pages(p, bytes);

  // Small mappings: page aligned, zero, no THP advice needed.
  auto* q = static_cast<unsigned char*>(hw::map_host_pages(1000));
  REQUIRE(q != nullptr);
  CHECK(q[999] == 0);
  hw::unmap_host_pages(q, 1000);
}

TEST_CASE("host pages: large mappings are THP-eligible", "[core][memory]") {
  const std::string mode = thp_mode();
  if (mode.find("[madvise]") == std::string::npos && mode.find("[always]") == std::string::npos)
    HW_SKIP_TEST("THP mode is '" << mode << "': no mapping is THP-eligible, nothing to check");
  const size_t bytes = (size_t(5) << 20) + 123;
  void* p = hw::map_host_pages(bytes);
  REQUIRE(p != nullptr);
  INFO("THP mode: " << mode);
  CHECK(thp_eligible(p) == 1);
  hw::unmap_host_pages(p, bytes);
}

TEST_CASE("host pages: advise_huge_pages makes a vector's aligned interior THP-eligible", "[core][memory]") {
  const std::string mode = thp_mode();
  // "always" makes every mapping eligible, advised or not: only madvise mode shows the advice.
  if (mode.find("[madvise]") == std::string::npos)
    HW_SKIP_TEST("THP mode is '" << mode << "', not madvise: the advice cannot be told from the default");
  std::vector<float> v;
  v.reserve(size_t(3) << 20);  // 12 MiB: at least one whole aligned 2 MiB block inside
  hw::advise_huge_pages(v.data(), v.capacity() * sizeof(float));
  const auto b = reinterpret_cast<uintptr_t>(v.data());
  const uintptr_t block = (b + (size_t(2) << 20) - 1) / (size_t(2) << 20) * (size_t(2) << 20);
  CHECK(thp_eligible(reinterpret_cast<const void*>(block)) == 1);
}
