#pragma once
// Tile geometry of the CUDA mixed-head attention (src/kernels/cuda/attention_*.cu): which key
// tiles a query tile of a head needs (only those intersecting its key set are ever loaded),
// which query tiles see a key tile (the backward's dK/dV items), and which of those tiles
// need the per-element mask. Host+device, so the CPU tests (tests/kernels/test_attention_tiles)
// check the very indexing the kernels run. Key tiles are aligned to multiples of kBc, so a
// tile is never visited twice when a sink and a window meet inside it.
#include <cstdint>

#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles {

constexpr int kBr = 64;            // query rows per tile (also the linear heads' chunk length)
constexpr int kBc = 64;            // keys per tile
constexpr int kAttnThreads = 256;  // threads of every attention block (all item kinds)

HW_HOST_DEVICE int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
HW_HOST_DEVICE int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
HW_HOST_DEVICE int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

// Keys visible to query i: j <= i && (j < sink || j > i - window). Softmax (and the causal
// static heads) use sink 0, window max(T, 1), as attn::detail::key_set does.
struct KeyRule {
  int64_t sink = 0, window = 1;
};

HW_HOST_DEVICE bool key_visible(const KeyRule& r, int64_t i, int64_t j) {
  return j <= i && (j < r.sink || j > i - r.window);
}

// Keys [0, i1) visible to some query row of [i0, i1), as at most two disjoint intervals
// [lo, hi) (returns the count): the sink [0, S) and the window (i0 - W, i1), merged when they
// touch. With i1 = i0 = c: the keys before c that row c sees (cached decoding's segments).
HW_HOST_DEVICE int key_intervals(const KeyRule& r, int64_t i0, int64_t i1, int64_t out[2][2]) {
  const int64_t sink_hi = min64(r.sink, i1);
  const int64_t win_lo = max64(0, i0 - r.window + 1);
  if (sink_hi <= 0 || win_lo <= sink_hi) {
    out[0][0] = sink_hi <= 0 ? win_lo : 0;
    out[0][1] = i1;
    return 1;
  }
  out[0][0] = 0;
  out[0][1] = sink_hi;
  out[1][0] = win_lo;
  out[1][1] = i1;
  return 2;
}

// Tile indices [lo, hi).
struct TileRange {
  int32_t lo = 0, hi = 0;
};

// Key tiles needed by query rows [i0, i1) (0 <= i0 < i1 <= T): the sink's tiles and the
// window's tiles, as one range when they touch or overlap, else two (returns the count).
HW_HOST_DEVICE int key_tile_ranges(const KeyRule& r, int64_t i0, int64_t i1, TileRange out[2]) {
  const int64_t sink_hi = min64(r.sink, i1);  // sink keys [0, sink_hi)
  const int64_t win_lo = max64(0, i0 - r.window + 1);
  const int32_t last = static_cast<int32_t>(ceil_div(i1, kBc));
  const int32_t wt_lo = static_cast<int32_t>(win_lo / kBc);
  if (sink_hi <= 0) {
    out[0] = {wt_lo, last};
    return 1;
  }
  const int32_t st_hi = static_cast<int32_t>(ceil_div(sink_hi, kBc));
  if (wt_lo <= st_hi) {
    out[0] = {0, last};
    return 1;
  }
  out[0] = {0, st_hi};
  out[1] = {wt_lo, last};
  return 2;
}

// Query tiles whose rows see some key of [j0, j1) (0 <= j0 < j1 <= T): the visible rows form
// the one interval [j0, T) when the tile holds a sink key, else [j0, j1 - 1 + window) clipped.
HW_HOST_DEVICE TileRange query_tile_range(const KeyRule& r, int64_t j0, int64_t j1, int64_t T) {
  const int64_t i_hi = j0 < r.sink ? T : min64(T, j1 - 1 + r.window);
  return {static_cast<int32_t>(j0 / kBr), static_cast<int32_t>(ceil_div(i_hi, kBr))};
}

// Whether the tile query rows [i0, i0 + kBr) x keys [j0, j0 + kBc) needs the per-element
// mask: some pair inside it is invisible or lies past T. Full tiles skip the predicate.
HW_HOST_DEVICE bool tile_needs_mask(const KeyRule& r, int64_t i0, int64_t j0, int64_t T) {
  const int64_t i1 = i0 + kBr, j1 = j0 + kBc;
  if (i1 > T || j1 > T) return true;
  if (j1 - 1 > i0) return true;  // crosses the causal diagonal
  // Every row's oldest visible non-sink key is i - window + 1; the last row is the strictest.
  const int64_t first_nonsink = max64(j0, r.sink);
  return first_nonsink < j1 && first_nonsink <= i1 - 1 - r.window;
}

// The tiles of ranges rg[0, n) walked in order as one sequence, in four integers instead of the
// ranges (what a double-buffered item carries through its loop to name the tile after the
// current one): the tile after kt is kt + 1, except that the end of the first range jumps to the
// start of the second.
struct TileWalk {
  int32_t first = 0, count = 0, gap_at = -1, gap_to = -1;
};
HW_HOST_DEVICE TileWalk tile_walk(const TileRange* rg, int n) {
  TileWalk w{rg[0].lo, rg[0].hi - rg[0].lo, -1, -1};
  if (n == 2) {
    w.count += rg[1].hi - rg[1].lo;
    w.gap_at = rg[0].hi;
    w.gap_to = rg[1].lo;
  }
  return w;
}
HW_HOST_DEVICE int32_t tile_after(const TileWalk& w, int32_t kt) { return kt + 1 == w.gap_at ? w.gap_to : kt + 1; }

// Number of key tiles query tile qt needs.
HW_HOST_DEVICE int64_t key_tiles_of_query_tile(const KeyRule& r, int64_t qt, int64_t T) {
  TileRange rg[2];
  const int n = key_tile_ranges(r, qt * kBr, min64(T, (qt + 1) * kBr), rg);
  return tile_walk(rg, n).count;
}

// Number of query tiles that see key tile kt.
HW_HOST_DEVICE int64_t query_tiles_of_key_tile(const KeyRule& r, int64_t kt, int64_t T) {
  const TileRange g = query_tile_range(r, kt * kBc, min64(T, (kt + 1) * kBc), T);
  return g.hi - g.lo;
}

}  // namespace hw::tiles
