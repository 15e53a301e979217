// Tile logic of the CUDA mixed-head attention, checked on the CPU against brute-force masks:
// the key tiles a query tile visits cover exactly the visible (i, j) pairs, each once; the
// query tiles a key tile's dK/dV item visits do too; the mask flag is exact; work follows
// each head's coverage; the launch schedule decodes to every item exactly once, longest first.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/tiles/attention_schedule.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"

using namespace hw::tiles;

namespace {

// Independent statement of the head plan's key sets (head_plan.hpp): softmax: j <= i;
// window:W: i - W < j <= i; sink_window:S:W: j <= i and (j < S or i - W < j).
bool allowed(const HeadShape& h, int64_t i, int64_t j) {
  if (j > i) return false;
  if (h.kind == kWindow) return j > i - h.window;
  if (h.kind == kSinkWindow) return j < h.sink || j > i - h.window;
  return true;
}

std::vector<HeadShape> sample_shapes() {
  std::vector<HeadShape> s = {{kSoftmax, 0, 0}, {kStatic, 0, 0}};
  for (int64_t w : {1, 5, 63, 64, 65, 100, 200, 1000}) s.push_back({kWindow, 0, w});
  for (int64_t sink : {0, 1, 4, 63, 64, 70, 150})
    for (int64_t w : {1, 17, 64, 128}) s.push_back({kSinkWindow, sink, w});
  return s;
}

const std::vector<int64_t> kLengths = {1, 2, 63, 64, 65, 130, 200, 333};

// seen[i * T + j] must be 1 exactly for the allowed pairs (0 elsewhere); names the first miss.
void check_coverage(const HeadShape& h, int64_t T, const std::vector<int>& seen) {
  int64_t bad = 0, bad_i = -1, bad_j = -1;
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j)
      if (seen[static_cast<size_t>(i * T + j)] != (allowed(h, i, j) ? 1 : 0) && bad++ == 0) {
        bad_i = i;
        bad_j = j;
      }
  INFO("kind " << int(h.kind) << " sink " << h.sink << " window " << h.window << " T " << T << " first bad pair "
               << bad_i << "," << bad_j);
  REQUIRE(bad == 0);
}

}  // namespace

TEST_CASE("attention tiles: key tiles of each query tile cover exactly the visible pairs, once") {
  for (const HeadShape& h : sample_shapes())
    for (int64_t T : kLengths) {
      const KeyRule r = key_rule_of(h, T);
      std::vector<int> seen(static_cast<size_t>(T * T), 0);
      for (int64_t i0 = 0; i0 < T; i0 += kBr) {
        const int64_t i1 = std::min(T, i0 + kBr);
        TileRange rg[2];
        const int n = key_tile_ranges(r, i0, i1, rg);
        REQUIRE((n == 1 || n == 2));
        if (n == 2) REQUIRE(rg[0].hi < rg[1].lo);  // disjoint, ordered, not touching
        for (int t = 0; t < n; ++t) {
          REQUIRE(rg[t].lo < rg[t].hi);
          for (int32_t kt = rg[t].lo; kt < rg[t].hi; ++kt) {
            int visible_in_tile = 0;
            for (int64_t i = i0; i < i1; ++i)
              for (int64_t j = kt * int64_t(kBc); j < std::min(T, (kt + 1) * int64_t(kBc)); ++j)
                if (key_visible(r, i, j)) {
                  ++seen[static_cast<size_t>(i * T + j)];
                  ++visible_in_tile;
                }
            INFO("kind " << int(h.kind) << " sink " << h.sink << " window " << h.window << " T " << T << " tile "
                         << kt);
            REQUIRE(visible_in_tile > 0);  // no tile is loaded for nothing
          }
        }
      }
      check_coverage(h, T, seen);
    }
}

TEST_CASE("attention tiles: query tiles of each key tile cover exactly the visible pairs, once") {
  for (const HeadShape& h : sample_shapes())
    for (int64_t T : kLengths) {
      const KeyRule r = key_rule_of(h, T);
      std::vector<int> seen(static_cast<size_t>(T * T), 0);
      for (int64_t j0 = 0; j0 < T; j0 += kBc) {
        const int64_t j1 = std::min(T, j0 + kBc);
        const TileRange g = query_tile_range(r, j0, j1, T);
        REQUIRE(g.lo < g.hi);
        for (int32_t qt = g.lo; qt < g.hi; ++qt) {
          int visible_in_tile = 0;
          for (int64_t i = qt * int64_t(kBr); i < std::min(T, (qt + 1) * int64_t(kBr)); ++i)
            for (int64_t j = j0; j < j1; ++j)
              if (key_visible(r, i, j)) {
                ++seen[static_cast<size_t>(i * T + j)];
                ++visible_in_tile;
              }
          REQUIRE(visible_in_tile > 0);
        }
      }
      check_coverage(h, T, seen);
    }
}

TEST_CASE("attention tiles: the mask flag is set exactly where some pair of the tile is hidden or past T") {
  for (const HeadShape& h : sample_shapes())
    for (int64_t T : kLengths) {
      const KeyRule r = key_rule_of(h, T);
      for (int64_t i0 = 0; i0 < T; i0 += kBr) {
        TileRange rg[2];
        const int n = key_tile_ranges(r, i0, std::min(T, i0 + kBr), rg);
        for (int t = 0; t < n; ++t)
          for (int32_t kt = rg[t].lo; kt < rg[t].hi; ++kt) {
            const int64_t j0 = kt * int64_t(kBc);
            bool hidden = false;
            for (int64_t i = i0; i < i0 + kBr; ++i)
              for (int64_t j = j0; j < j0 + kBc; ++j) hidden = hidden || i >= T || j >= T || !allowed(h, i, j);
            INFO("kind " << int(h.kind) << " sink " << h.sink << " window " << h.window << " T " << T << " tile "
                         << i0 << "," << j0);
            REQUIRE(tile_needs_mask(r, i0, j0, T) == hidden);
          }
      }
    }
}

TEST_CASE("attention tiles: work per head follows its coverage") {
  const int64_t T = 4096;
  const int64_t nqt = T / kBr;
  auto tiles_of = [&](const HeadShape& h) {
    int64_t c = 0;
    for (int64_t qt = 0; qt < nqt; ++qt) c += key_tiles_of_query_tile(key_rule_of(h, T), qt, T);
    return c;
  };
  auto pairs_of = [&](const HeadShape& h) {
    int64_t c = 0;
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j <= i; ++j) c += allowed(h, i, j);
    return c;
  };
  const HeadShape full{kSoftmax, 0, 0};
  REQUIRE(tiles_of(full) == nqt * (nqt + 1) / 2);
  for (const HeadShape& h : sample_shapes()) {
    // Per query tile: at most the tiles spanned by kBr + W - 1 keys plus the sink's tiles.
    if (h.kind == kWindow || h.kind == kSinkWindow)
      for (int64_t qt = 0; qt < nqt; ++qt)
        REQUIRE(key_tiles_of_query_tile(key_rule_of(h, T), qt, T) <=
                ceil_div(kBr + h.window - 1, kBc) + 1 + ceil_div(h.sink, kBc));
    // Work relative to full causal tracks the coverage ratio within tile rounding: at most
    // three partly covered tiles per query tile (window start, diagonal, sink end).
    const double work = double(tiles_of(h)) / double(tiles_of(full));
    const double acr = double(pairs_of(h)) / double(pairs_of(full));
    INFO("kind " << int(h.kind) << " sink " << h.sink << " window " << h.window << " work " << work << " acr " << acr);
    REQUIRE(work >= acr);
    REQUIRE(work <= acr + 3.0 * double(nqt) / double(tiles_of(full)));
  }
}

namespace {

ScheduleInput random_plan(hw::Rng& rng, int64_t T) {
  ScheduleInput in;
  const int per_group[] = {1, 2, 3, 4};
  const int pg = per_group[static_cast<int>(rng.uniform() * 4)];
  in.n_kv_head = 1 + static_cast<int>(rng.uniform() * 4);
  const int H = pg * in.n_kv_head;
  in.B = 1 + static_cast<int>(rng.uniform() * 3);
  in.T = T;
  in.head_dim = rng.uniform() < 0.5 ? 64 : 128;
  for (int h = 0; h < H; ++h) {
    const int k = static_cast<int>(rng.uniform() * 6);
    HeadShape s{static_cast<uint8_t>(k), 0, 0};
    if (k == kWindow || k == kSinkWindow) s.window = 1 + static_cast<int64_t>(rng.uniform() * 150);
    if (k == kSinkWindow) s.sink = static_cast<int64_t>(rng.uniform() * 80);
    in.heads.push_back(s);
  }
  return in;
}

using Key = std::tuple<int, int, int, int>;  // kind, b, unit, tile

std::set<Key> expected_forward(const ScheduleInput& in) {
  std::set<Key> e;
  const int nqt = static_cast<int>(ceil_div(in.T, kBr));
  for (int b = 0; b < in.B; ++b)
    for (int h = 0; h < static_cast<int>(in.heads.size()); ++h) {
      const uint8_t k = in.heads[static_cast<size_t>(h)].kind;
      if (k == kLinear)
        for (int st = 0; st < linear_stage_count(in.head_dim); ++st) e.insert({kFwdLinear, b, h, st});
      else if (k != kPruned)
        for (int t = 0; t < nqt; ++t) e.insert({softmax_family(k) ? kFwdSoftmax : kFwdStatic, b, h, t});
    }
  return e;
}

std::set<Key> expected_backward(const ScheduleInput& in) {
  std::set<Key> e;
  const int nt = static_cast<int>(ceil_div(in.T, kBr));
  const int H = static_cast<int>(in.heads.size()), per = H / in.n_kv_head;
  for (int b = 0; b < in.B; ++b) {
    for (int h = 0; h < H; ++h) {
      const uint8_t k = in.heads[static_cast<size_t>(h)].kind;
      if (k == kLinear)
        for (int st = 0; st < linear_stage_count(in.head_dim); ++st) {
          e.insert({kBwdLinearDq, b, h, st});
          e.insert({kBwdLinearDkv, b, h, st});
        }
      if (softmax_family(k))
        for (int t = 0; t < nt; ++t) e.insert({kBwdDq, b, h, t});
    }
    for (int g = 0; g < in.n_kv_head; ++g) {
      bool any = false;
      for (int h = g * per; h < (g + 1) * per; ++h) {
        const uint8_t k = in.heads[static_cast<size_t>(h)].kind;
        any = any || softmax_family(k) || k == kStatic;
      }
      if (any)
        for (int t = 0; t < nt; ++t) e.insert({kBwdDkv, b, g, t});
    }
  }
  return e;
}

// Decodes every item; checks it is a bijection onto `expected` and (when `ordered`) that
// costs never increase along the launch order. Always: a linear stage comes after its
// predecessor in the same chain (it waits for it, chain_sync.cuh).
void check_schedule(const ScheduleInput& in, const WorkSchedule& s, const std::set<Key>& expected, bool ordered) {
  REQUIRE(s.n_segments <= kMaxSegments);
  REQUIRE(s.n_items == static_cast<int32_t>(expected.size()));
  std::set<Key> got;
  double prev = 1e300;
  for (int32_t i = 0; i < s.n_items; ++i) {
    const WorkItem w = decode_item(s, i);
    const Key k{w.kind, w.b, w.unit, w.tile};
    REQUIRE(expected.count(k) == 1);
    REQUIRE(got.insert(k).second);
    if (is_linear_item(w.kind) && w.tile > 0) REQUIRE(got.count(Key{w.kind, w.b, w.unit, w.tile - 1}) == 1);
    const double c = item_cost(in, w);
    if (ordered) REQUIRE(c <= prev + 1e-12);
    prev = c;
  }
}

}  // namespace

TEST_CASE("attention schedule: decode is a bijection onto the plan's items, longest first") {
  hw::Rng rng(20261130);
  for (int rep = 0; rep < 60; ++rep) {
    const int64_t T = 1 + static_cast<int64_t>(rng.uniform() * 700);
    const ScheduleInput in = random_plan(rng, T);
    INFO("rep " << rep << " T " << T << " heads " << in.heads.size() << " kv " << in.n_kv_head);
    check_schedule(in, build_forward_schedule(in), expected_forward(in), true);
    check_schedule(in, build_backward_schedule(in), expected_backward(in), true);
  }
}

TEST_CASE("attention schedule: identical heads share segments, and long sequences still fit") {
  ScheduleInput in;
  in.n_kv_head = 4;
  in.B = 2;
  in.T = 1024;
  for (int h = 0; h < 12; ++h) in.heads.push_back({kSoftmax, 0, 0});
  const WorkSchedule f = build_forward_schedule(in);
  REQUIRE(f.n_segments == 1);  // one profile, tiles in one descending run
  REQUIRE(f.seg[0].step == -1);
  REQUIRE(f.seg[0].tile_first == 15);
  REQUIRE(popcount64(f.seg[0].units) == 12);
  // Mixed kinds at T = 65536 would need thousands of exact-order segments: buckets kick in.
  in.T = 65536;
  in.B = 1;
  in.heads = {{kSoftmax, 0, 0}, {kStatic, 0, 0}, {kWindow, 0, 1000}, {kSinkWindow, 4, 300},
              {kLinear, 0, 0},  {kSoftmax, 0, 0}, {kStatic, 0, 0},      {kPruned, 0, 0}};
  check_schedule(in, build_forward_schedule(in), expected_forward(in), false);
  check_schedule(in, build_backward_schedule(in), expected_backward(in), false);
}

TEST_CASE("attention tiles: a tile walk visits the key ranges in order, as the nested loops do") {
  int64_t two_range_cases = 0;
  for (const HeadShape& h : sample_shapes())
    for (int64_t T : kLengths) {
      const KeyRule r = key_rule_of(h, T);
      for (int64_t i0 = 0; i0 < T; i0 += kBr) {
        TileRange rg[2];
        const int n = key_tile_ranges(r, i0, std::min(T, i0 + kBr), rg);
        two_range_cases += n == 2;
        std::vector<int32_t> nested;
        for (int t = 0; t < n; ++t)
          for (int32_t kt = rg[t].lo; kt < rg[t].hi; ++kt) nested.push_back(kt);
        const TileWalk w = tile_walk(rg, n);
        REQUIRE(w.count == static_cast<int32_t>(nested.size()));
        int32_t kt = w.first;
        for (int32_t it = 0; it < w.count; ++it, kt = tile_after(w, kt)) REQUIRE(kt == nested[size_t(it)]);
      }
    }
  CHECK(two_range_cases > 0);  // the sink + window split was exercised
}
