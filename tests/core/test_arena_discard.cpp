// Arena::discard on host arenas: the tensor reads as zeros, its neighbours (sharing its partial
// pages) keep every value, it can be written again, and its whole pages leave the process's
// resident memory (VmRSS from /proc, the kernel's count).
#include <catch2/catch.hpp>

#include "headwise/core/arena.hpp"
#include "headwise/core/process_stats.hpp"

using namespace hw;

TEST_CASE("arena: discard zeroes one tensor, keeps its neighbours and returns its pages", "[core][arena]") {
  Arena a("params");
  // Odd sizes, so the big tensor's ends share pages with its neighbours.
  Tensor* before = a.declare("before", {1001});
  Tensor* big = a.declare("big", {16 << 20});  // 64 MiB
  Tensor* after = a.declare("after", {999});
  a.allocate();
  for (Tensor* t : {before, big, after})
    for (int64_t i = 0; i < t->numel(); ++i) t->f32()[i] = float(i % 97) + 1.f;
  const long full = long(current_rss_bytes() / 1024);
  a.discard(*big);
  const long dropped = long(current_rss_bytes() / 1024);
  {
    INFO("VmRSS " << full << " kB written, " << dropped << " kB after discard");
    CHECK(full - dropped > 60 * 1024);  // (all but at most two partial pages of 64 MiB)
  }
  bool zeros = true, kept = true;
  for (int64_t i = 0; i < big->numel(); ++i) zeros = zeros && big->f32()[i] == 0.f;
  for (Tensor* t : {before, after})
    for (int64_t i = 0; i < t->numel(); ++i) kept = kept && t->f32()[i] == float(i % 97) + 1.f;
  CHECK(zeros);
  CHECK(kept);
  big->f32()[12345] = 7.f;  // usable again
  CHECK(big->f32()[12345] == 7.f);
  CHECK_THROWS_WITH(Arena("other").discard(*big), Catch::Contains("not a tensor of this allocated CPU arena"));
}
