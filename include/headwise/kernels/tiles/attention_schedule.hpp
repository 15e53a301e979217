#pragma once
// Builds the work order of one attention launch (host side; the kernels decode it with
// decode_item in work_schedule.hpp). Every item gets a cost estimate in units of one tile
// product (kBr x kBc x head_dim multiply-adds); items are launched longest first, so the
// blocks that start last are the cheap ones and none idles behind a long head at the end.
// Units (heads, or KV groups for dK/dV items) whose items cost the same tile for tile share a
// "profile" and are interleaved in one segment; consecutive tiles of one profile form a run,
// so a layer's schedule is a few hundred segments at most. When exact ordering would need
// more than kMaxSegments segments, costs are compared in coarser (relative) buckets.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "headwise/attention/head_kind.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/linear_chunk.hpp"
#include "headwise/kernels/tiles/work_schedule.hpp"

namespace hw::tiles {

// One query head as the scheduler sees it; kind uses attn::HeadKind's values
// (0 softmax, 1 window, 2 sink_window, 3 static, 4 linear, 5 pruned).
struct HeadShape {
  uint8_t kind = 0;
  int64_t sink = 0, window = 0;  // window / sink_window only
};
using namespace attn::kind_bytes;  // kSoftmax ... kPruned: the bytes HeadShape::kind holds

struct ScheduleInput {
  std::vector<HeadShape> heads;  // per query head, at most 64
  int n_kv_head = 1;
  int B = 0;
  int64_t T = 0;
  int head_dim = 64;
};

inline bool softmax_family(uint8_t kind) { return kind <= kSinkWindow; }

inline KeyRule key_rule_of(const HeadShape& h, int64_t T) {
  if (h.kind == kWindow) return {0, h.window};
  if (h.kind == kSinkWindow) return {h.sink, h.window};
  return {0, max64(T, 1)};  // softmax and the causal static heads
}

// ---- cost model (tile products; only ratios matter) ----
constexpr double kItemOverhead = 0.5;   // loading the item's own tile, writing its result
constexpr double kStaticTile = 1.25;     // P V with P rebuilt from alpha/rho (one exp per weight)
constexpr double kLinearChunkOverhead = 0.25;  // loading a chunk, the chain's wait and add
// One stage of a linear head's chain (kind kFwdLinear, kBwdLinearDq or kBwdLinearDkv) walks
// every chunk of T; per chunk and per feature block of FB slots it runs `state` products with
// the state slice (FB x C x (D+1) multiply-adds each) and `pair` products with a chunk matrix
// (C x C x FB each), then `chunk` products of a chunk matrix with chunk rows (C x C x (D+1)).
inline double linear_stage_cost(const ScheduleInput& in, uint8_t kind, int32_t stage) {
  const double D = in.head_dim, C = kLinChunk, FB = linear_feature_block(in.head_dim);
  const int blocks = linear_feature_blocks(in.head_dim);
  const double nb = double(min64(kLinStageBlocks, blocks - int64_t(stage) * kLinStageBlocks));
  const double state = kind == kBwdLinearDkv ? 3 : 2, pair = kind == kBwdLinearDkv ? 2 : 1,
               chunk = kind == kBwdLinearDkv ? 2 : 1;
  const double macs = nb * (state * FB * C * (D + 1) + pair * C * C * FB) + chunk * C * C * (D + 1);
  return kItemOverhead +
         double(ceil_div(in.T, kLinChunk)) * (kLinearChunkOverhead + macs / (double(kBr) * kBc * D));
}

inline double fwd_item_cost(const ScheduleInput& in, int head, int32_t tile) {
  const HeadShape& h = in.heads[static_cast<size_t>(head)];
  if (h.kind == kLinear) return linear_stage_cost(in, kFwdLinear, tile);
  const double nkt = double(key_tiles_of_query_tile(key_rule_of(h, in.T), tile, in.T));
  return kItemOverhead + (h.kind == kStatic ? kStaticTile : 2.0) * nkt;
}

// kBwdDq: QK^T, dO V^T and dS K per key tile.
inline double dq_item_cost(const ScheduleInput& in, int head, int32_t tile) {
  return kItemOverhead + 3.0 * double(key_tiles_of_query_tile(key_rule_of(in.heads[size_t(head)], in.T), tile, in.T));
}

// kBwdDkv: per query tile that sees the key tile, QK^T, dO V^T, P^T dO, dS^T Q for every
// softmax-family head of the group, P^T dO for every static one.
inline double dkv_item_cost(const ScheduleInput& in, int group, int32_t tile) {
  const int per_group = static_cast<int>(in.heads.size()) / in.n_kv_head;
  double c = kItemOverhead;
  for (int h = group * per_group; h < (group + 1) * per_group; ++h) {
    const HeadShape& s = in.heads[static_cast<size_t>(h)];
    if (softmax_family(s.kind)) c += 4.0 * double(query_tiles_of_key_tile(key_rule_of(s, in.T), tile, in.T));
    if (s.kind == kStatic) c += kStaticTile * double(query_tiles_of_key_tile(key_rule_of(s, in.T), tile, in.T));
  }
  return c;
}

inline double item_cost(const ScheduleInput& in, const WorkItem& w) {
  switch (w.kind) {
    case kFwdSoftmax:
    case kFwdStatic:
    case kFwdLinear: return fwd_item_cost(in, w.unit, w.tile);
    case kBwdDq: return dq_item_cost(in, w.unit, w.tile);
    case kBwdDkv: return dkv_item_cost(in, w.unit, w.tile);
    default: return linear_stage_cost(in, w.kind, w.tile);
  }
}

// Whether KV group g has a head that needs a dK/dV item (softmax-family or static).
inline bool group_has_dkv_items(const ScheduleInput& in, int g) {
  const int per_group = static_cast<int>(in.heads.size()) / in.n_kv_head;
  for (int h = g * per_group; h < (g + 1) * per_group; ++h) {
    const uint8_t k = in.heads[static_cast<size_t>(h)].kind;
    if (softmax_family(k) || k == kStatic) return true;
  }
  return false;
}

namespace detail {

struct Profile {
  uint8_t kind = 0;
  uint64_t units = 0;
  std::vector<double> cost;  // per tile
};

struct Entry {
  double key = 0, cost = 0;
  int profile = 0;
  int32_t tile = 0;
};

// Units with identical item kind and cost sequence share a profile (first-seen order).
inline void add_unit(std::vector<Profile>& ps, std::map<std::pair<uint8_t, std::vector<double>>, int>& index,
                     uint8_t kind, int unit, std::vector<double> cost) {
  auto key = std::make_pair(kind, std::move(cost));
  auto it = index.find(key);
  if (it == index.end()) {
    it = index.emplace(key, static_cast<int>(ps.size())).first;
    ps.push_back(Profile{kind, 0, key.second});
  }
  ps[static_cast<size_t>(it->second)].units |= uint64_t(1) << unit;
}

// Orders every (profile, tile) by cost bucket (descending) and compresses runs into segments;
// returns false when they do not fit. bucket_ratio 0: exact costs; < 0: one bucket.
inline bool pack(const std::vector<Profile>& ps, int B, double bucket_ratio, WorkSchedule& s) {
  std::vector<Entry> es;
  for (size_t p = 0; p < ps.size(); ++p)
    for (size_t t = 0; t < ps[p].cost.size(); ++t) {
      const double c = ps[p].cost[t];
      double key = c;
      if (bucket_ratio < 0) key = 0;
      else if (bucket_ratio > 0) key = std::floor(std::log(c) / std::log1p(bucket_ratio));
      es.push_back(Entry{key, bucket_ratio < 0 ? 0.0 : c, static_cast<int>(p), static_cast<int32_t>(t)});
    }
  std::sort(es.begin(), es.end(), [&ps](const Entry& a, const Entry& b) {
    if (a.key != b.key) return a.key > b.key;
    if (a.profile != b.profile) return a.profile < b.profile;
    if (a.cost != b.cost) return a.cost > b.cost;
    // A linear stage waits for its predecessor, which must come first (lower ticket). A
    // chain's stage costs never increase (only the last stage may own fewer blocks), so the
    // order by cost keeps them in stage order; ties go to the lower stage here.
    return is_linear_item(ps[size_t(a.profile)].kind) ? a.tile < b.tile : a.tile > b.tile;
  });
  s = WorkSchedule{};
  s.B = B;
  int n = 0;
  for (size_t e = 0; e < es.size(); ++e) {
    WorkSegment* cur = n > 0 ? &s.seg[n - 1] : nullptr;
    const bool same = cur && e > 0 && es[e - 1].profile == es[e].profile;
    if (same && cur->tile_count == 1 && (es[e].tile == cur->tile_first + 1 || es[e].tile == cur->tile_first - 1)) {
      cur->step = static_cast<int8_t>(es[e].tile - cur->tile_first);
      cur->tile_count = 2;
      continue;
    }
    if (same && cur->tile_count > 1 && es[e].tile == cur->tile_first + cur->step * cur->tile_count) {
      ++cur->tile_count;
      continue;
    }
    if (n == kMaxSegments) return false;
    const Profile& p = ps[static_cast<size_t>(es[e].profile)];
    s.seg[n] = WorkSegment{p.units, es[e].tile, 1, -1, p.kind};
    ++n;
  }
  s.n_segments = n;
  int64_t items = 0;
  for (int g = 0; g < n; ++g) {
    s.begin[g] = static_cast<int32_t>(items);
    items += int64_t(popcount64(s.seg[g].units)) * B * s.seg[g].tile_count;
  }
  s.begin[n] = static_cast<int32_t>(items);
  s.n_items = static_cast<int32_t>(items);
  return items < (int64_t(1) << 31);
}

inline WorkSchedule pack_fitting(const std::vector<Profile>& ps, int B) {
  WorkSchedule s;
  for (double ratio : {0.0, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 3.0, -1.0})
    if (pack(ps, B, ratio, s)) return s;
  return s;  // unreachable for <= 64 units per kind: one bucket gives one run per profile
}

}  // namespace detail

// Forward: softmax-family and static heads by query tile, linear heads by stage; pruned: none.
inline WorkSchedule build_forward_schedule(const ScheduleInput& in) {
  std::vector<detail::Profile> ps;
  std::map<std::pair<uint8_t, std::vector<double>>, int> index;
  const int32_t nqt = static_cast<int32_t>(ceil_div(in.T, kBr));
  for (int h = 0; h < static_cast<int>(in.heads.size()); ++h) {
    const uint8_t k = in.heads[static_cast<size_t>(h)].kind;
    if (k == kPruned || in.T == 0) continue;
    const uint8_t item = softmax_family(k) ? kFwdSoftmax : k == kStatic ? kFwdStatic : kFwdLinear;
    std::vector<double> c(static_cast<size_t>(item == kFwdLinear ? linear_stage_count(in.head_dim) : nqt));
    for (size_t t = 0; t < c.size(); ++t) c[t] = fwd_item_cost(in, h, static_cast<int32_t>(t));
    detail::add_unit(ps, index, item, h, std::move(c));
  }
  return detail::pack_fitting(ps, in.B);
}

// Backward: dQ items of softmax-family heads, dK/dV items of KV groups with a softmax-family
// or static head, and the two stage chains of each linear head.
inline WorkSchedule build_backward_schedule(const ScheduleInput& in) {
  std::vector<detail::Profile> ps;
  std::map<std::pair<uint8_t, std::vector<double>>, int> index;
  const int32_t nqt = static_cast<int32_t>(ceil_div(in.T, kBr));
  const int32_t nkt = static_cast<int32_t>(ceil_div(in.T, kBc));
  if (in.T > 0) {
    for (int h = 0; h < static_cast<int>(in.heads.size()); ++h) {
      const uint8_t k = in.heads[static_cast<size_t>(h)].kind;
      if (softmax_family(k)) {
        std::vector<double> c(static_cast<size_t>(nqt));
        for (int32_t t = 0; t < nqt; ++t) c[static_cast<size_t>(t)] = dq_item_cost(in, h, t);
        detail::add_unit(ps, index, kBwdDq, h, std::move(c));
      } else if (k == kLinear) {
        for (const uint8_t kind : {kBwdLinearDq, kBwdLinearDkv}) {
          std::vector<double> c(static_cast<size_t>(linear_stage_count(in.head_dim)));
          for (size_t t = 0; t < c.size(); ++t) c[t] = linear_stage_cost(in, kind, static_cast<int32_t>(t));
          detail::add_unit(ps, index, kind, h, std::move(c));
        }
      }
    }
    for (int g = 0; g < in.n_kv_head; ++g) {
      if (!group_has_dkv_items(in, g)) continue;
      std::vector<double> c(static_cast<size_t>(nkt));
      for (int32_t t = 0; t < nkt; ++t) c[static_cast<size_t>(t)] = dkv_item_cost(in, g, t);
      detail::add_unit(ps, index, kBwdDkv, g, std::move(c));
    }
  }
  return detail::pack_fitting(ps, in.B);
}

}  // namespace hw::tiles
