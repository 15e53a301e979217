#pragma once
// The work order of one attention launch, compact enough to travel inside the kernel's
// parameter block: a list of segments, each a run of tiles of one item kind over a set of
// heads (or KV groups) and every sequence. Block i of the launch decodes item i (item i is
// ticket i when the layer has linear heads, see is_linear_item); the host
// builds the segments longest-first (attention_schedule.hpp) so no block idles behind a long
// head at the end of the launch.
#include <cstdint>

#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles {

// What an item computes (forward: one launch of kinds kFwd*; backward: kBwd*).
enum ItemKind : uint8_t {
  kFwdSoftmax = 0,  // (b, head, query tile) of a softmax-family head
  kFwdStatic = 1,   // (b, head, query tile) of a static head
  kFwdLinear = 2,     // (b, head, stage): one stage of a linear head's chain (all of T)
  kBwdDq = 3,         // (b, head, query tile): dQ of a softmax-family head
  kBwdDkv = 4,        // (b, KV group, key tile): dK/dV of the group's softmax-family and static heads
  kBwdLinearDq = 5,   // (b, head, stage): a linear head's dQ (and dL) chain, chunks forward
  kBwdLinearDkv = 6,  // (b, head, stage): a linear head's dK/dV chain, chunks backward
};

// Linear items form chains: stage s of (b, head) waits for stage s - 1, so a launch with
// linear heads hands out items in ticket order and the schedule puts every stage after its
// predecessor (attention_schedule.hpp).
HW_HOST_DEVICE constexpr bool is_linear_item(uint8_t kind) {
  return kind == kFwdLinear || kind == kBwdLinearDq || kind == kBwdLinearDkv;
}

constexpr int kMaxSegments = 512;

// Items of a segment, in launch order: for k in [0, tile_count): tile = tile_first + step * k;
// for b in [0, B): for each set bit u of `units` (ascending): item (kind, b, u, tile).
struct WorkSegment {
  uint64_t units = 0;  // heads (or KV groups for kBwdDkv)
  int32_t tile_first = 0;
  int32_t tile_count = 0;
  int8_t step = -1;
  uint8_t kind = 0;
};

struct WorkSchedule {
  int32_t n_segments = 0;
  int32_t n_items = 0;
  int32_t B = 0;
  int32_t begin[kMaxSegments + 1] = {};  // first item of each segment; begin[n_segments] = n_items
  WorkSegment seg[kMaxSegments];
};

struct WorkItem {
  uint8_t kind = 0;
  int32_t b = 0;
  int32_t unit = 0;  // head, or KV group for kBwdDkv
  int32_t tile = 0;  // query tile (kFwd*, kBwdDq), key tile (kBwdDkv), stage (linear items)
};

HW_HOST_DEVICE int popcount64(uint64_t x) {
  int n = 0;
  for (; x; x &= x - 1) ++n;
  return n;
}

// Index of the n-th (0-based) set bit of x; x has more than n set bits.
HW_HOST_DEVICE int nth_set_bit(uint64_t x, int n) {
  for (int i = 0; i < n; ++i) x &= x - 1;
  int bit = 0;
  while (!(x & 1u)) {
    x >>= 1;
    ++bit;
  }
  return bit;
}

HW_HOST_DEVICE int32_t units_per_tile(const WorkSchedule& s, int seg) {
  return popcount64(s.seg[seg].units) * s.B;
}

// item in [0, n_items) -> its segment (binary search over begin[]) and coordinates.
HW_HOST_DEVICE WorkItem decode_item(const WorkSchedule& s, int32_t item) {
  int lo = 0, hi = s.n_segments - 1;
  while (lo < hi) {  // last segment with begin <= item
    const int mid = (lo + hi + 1) / 2;
    if (s.begin[mid] <= item) lo = mid;
    else hi = mid - 1;
  }
  const WorkSegment& g = s.seg[lo];
  const int nu = popcount64(g.units);
  const int32_t local = item - s.begin[lo];
  const int32_t per_tile = nu * s.B;
  const int32_t k = local / per_tile;
  const int32_t rem = local % per_tile;
  WorkItem w;
  w.kind = g.kind;
  w.b = rem / nu;
  w.unit = nth_set_bit(g.units, rem % nu);
  w.tile = g.tile_first + g.step * k;
  return w;
}

}  // namespace hw::tiles
