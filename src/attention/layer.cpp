// The layer entry point: checks the inputs, then dispatches every (sequence, head) to its
// kind's math through the CPU table (kind_table.hpp; no kind is named here). Forward tasks are
// (b, query head): each writes its own output block and row statistics. Backward tasks are (b, KV group): the query heads of a group share K/V
// gradient blocks, so one task owns them and adds the heads' shares in head order. Parameter
// gradients (static alpha/rho, linear L, ...) are summed over b, so tasks write per-(b, head)
// partials that each kind reduces in b order after the parallel region: deterministic, no atomics.
// A single task runs on the calling thread (waking the team would cost more than it saves).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attention/head_kernels.hpp"
#include "attention/kind_table.hpp"
#include "attention/tile_ops.hpp"
#include "headwise/attention/attention.hpp"
#include "headwise/core/error.hpp"

namespace hw::attn {
namespace {

using detail::HeadBwd;
using detail::HeadFwd;
using detail::head_name;

struct Sizes {
  int64_t partial_per_head = 0;  // backward parameter-gradient partials per (b, head)
  int64_t per_thread = 0;        // scratch of one thread
};

Sizes sizes(const LayerPlan& plan, const LayerLayout& layout, const AttnDims& dims) {
  Sizes s;
  for (const HeadSpec& h : plan) {
    const detail::CpuKind& k = detail::cpu_kind(h.kind);
    s.per_thread = std::max(s.per_thread, k.scratch(h, layout.head_dim));
    s.partial_per_head = std::max(s.partial_per_head, k.partials(h, dims.T, layout.head_dim));
  }
  return s;
}

template <class F>
void check_inputs(const LayerPlan& plan, const LayerLayout& layout, const AttnDims& dims,
                  const LayerHeadParams<F>& params) {
  check(plan.size() == static_cast<size_t>(layout.n_head),
        "attention: plan has " + std::to_string(plan.size()) + " heads, layout has " + std::to_string(layout.n_head));
  check(dims.B >= 0 && dims.T >= 0, "attention: negative batch or sequence length");
  for (int h = 0; h < layout.n_head; ++h) {
    const HeadSpec& s = plan[static_cast<size_t>(h)];
    if (const std::string why = s.invalid_reason(); !why.empty()) fail(head_name(h) + ": " + why);
    const detail::CpuKind* k = detail::find_cpu_kind(s.kind);
    check(k != nullptr, head_name(h) + " is '" + s.str() + "', a kind the CPU backend has no entry for");
    k->check(params, h, s, layout.head_dim);
  }
}

}  // namespace

int attention_threads() { return omp_get_max_threads(); }

int64_t row_stats_size(const LayerLayout& layout, const AttnDims& dims) { return dims.B * layout.n_head * dims.T; }

int64_t workspace_size(const LayerPlan& plan, const LayerLayout& layout, const AttnDims& dims, int threads) {
  const Sizes s = sizes(plan, layout, dims);
  return dims.B * layout.n_head * s.partial_per_head + int64_t(std::max(threads, 1)) * s.per_thread;
}

template <class F>
void layer_forward(const LayerPlan& plan, const LayerLayout& layout, const AttnDims& dims,
                   const LayerHeadParams<F>& params, const F* qkv, F* out, F* row_stats, F* workspace) {
  check_inputs(plan, layout, dims, params);
  const Sizes sz = sizes(plan, layout, dims);
  const int H = layout.n_head;
  const int64_t T = dims.T, ldx = layout.qkv_width(), ldo = layout.out_width();
  F* scratch0 = workspace + dims.B * H * sz.partial_per_head;
  const int64_t n_tasks = dims.B * H;
  std::vector<int64_t> bad(static_cast<size_t>(n_tasks), -1);  // first bad denominator per task
  const detail::BlasSingleThreaded blas_on_calling_thread;  // heads are the parallel dimension
#pragma omp parallel for schedule(static) if (n_tasks > 1)
  for (int64_t task = 0; task < n_tasks; ++task) {
    const int64_t b = task / H;
    const int h = static_cast<int>(task % H);
    const HeadSpec& spec = plan[static_cast<size_t>(h)];
    F* stats = row_stats + task * T;
    const detail::CpuKind& kind = detail::cpu_kind(spec.kind);
    if (!kind.computes()) {  // no output block, no work
      std::fill(stats, stats + T, F(0));
      continue;
    }
    const int g = layout.kv_head_of(h);
    const F* x = qkv + b * T * ldx;
    HeadFwd<F> a;
    a.T = T;
    a.D = layout.head_dim;
    a.ldx = ldx;
    a.ldo = ldo;
    a.q = spec.reads_qk() ? x + layout.q_col(h) : nullptr;
    a.k = spec.reads_qk() ? x + layout.k_col(g) : nullptr;
    a.v = x + layout.v_col(g);
    a.out = out + b * T * ldo + layout.out_col(h);
    a.stats = stats;
    a.ws = scratch0 + int64_t(omp_get_thread_num()) * sz.per_thread;
    bad[size_t(task)] = kind.forward(params, h, spec, a);
  }
  // A kernel head stops at its first bad denominator and reports its position here (an
  // exception must not leave the OpenMP region).
  for (int64_t task = 0; task < n_tasks; ++task)
    if (bad[size_t(task)] >= 0) {
      const HeadSpec& spec = plan[static_cast<size_t>(task % H)];
      fail("attention: " + spec.str() + " head " + std::to_string(task % H) + " (sequence " + std::to_string(task / H) +
           ") has a non-positive or non-finite denominator at position " + std::to_string(bad[size_t(task)]));
    }
}

template <class F>
void layer_backward(const LayerPlan& plan, const LayerLayout& layout, const AttnDims& dims,
                    const LayerHeadParams<F>& params, const F* qkv, const F* out, const F* row_stats,
                    const F* dout, F* dqkv, F* workspace) {
  check_inputs(plan, layout, dims, params);
  const Sizes sz = sizes(plan, layout, dims);
  const int H = layout.n_head, KV = layout.n_kv_head, per_group = H / KV, D = layout.head_dim;
  const int64_t T = dims.T, ldx = layout.qkv_width(), ldo = layout.out_width();
  F* partials = workspace;
  F* scratch0 = workspace + dims.B * H * sz.partial_per_head;
  auto partial = [&](int64_t b, int h) { return partials + (b * H + h) * sz.partial_per_head; };
  const int64_t n_tasks = dims.B * KV;
  const detail::BlasSingleThreaded blas_on_calling_thread;  // KV groups are the parallel dimension
#pragma omp parallel for schedule(static) if (n_tasks > 1)
  for (int64_t task = 0; task < n_tasks; ++task) {
    const int64_t b = task / KV;
    const int g = static_cast<int>(task % KV);
    const F* x = qkv + b * T * ldx;
    F* dx = dqkv + b * T * ldx;
    // This task owns every dQKV column block of the group for sequence b: zero them first.
    auto zero_block = [&](int64_t col) {
      for (int64_t t = 0; t < T; ++t) std::fill(dx + t * ldx + col, dx + t * ldx + col + D, F(0));
    };
    for (int h = g * per_group; h < (g + 1) * per_group; ++h)
      if (layout.q_slot[static_cast<size_t>(h)] >= 0) zero_block(layout.q_col(h));
    if (layout.k_slot[static_cast<size_t>(g)] >= 0) zero_block(layout.k_col(g));
    if (layout.v_slot[static_cast<size_t>(g)] >= 0) zero_block(layout.v_col(g));
    F* ws = scratch0 + int64_t(omp_get_thread_num()) * sz.per_thread;
    for (int h = g * per_group; h < (g + 1) * per_group; ++h) {
      const HeadSpec& spec = plan[static_cast<size_t>(h)];
      const detail::CpuKind& kind = detail::cpu_kind(spec.kind);
      if (!kind.computes()) continue;
      std::fill(partial(b, h), partial(b, h) + sz.partial_per_head, F(0));
      HeadBwd<F> a;
      a.T = T;
      a.D = D;
      a.ldx = ldx;
      a.ldo = ldo;
      if (spec.reads_qk()) {
        a.q = x + layout.q_col(h);
        a.k = x + layout.k_col(g);
        a.dq = dx + layout.q_col(h);
        a.dk = dx + layout.k_col(g);
      }
      a.v = x + layout.v_col(g);
      a.dv = dx + layout.v_col(g);
      a.out = out + b * T * ldo + layout.out_col(h);
      a.dout = dout + b * T * ldo + layout.out_col(h);
      a.stats = row_stats + (b * H + h) * T;
      a.ws = ws;
      kind.backward(params, h, spec, a, partial(b, h));
    }
  }
  // Parameter gradients: each kind reduces its per-sequence partials in b order.
  for (int h = 0; h < H; ++h) {
    const HeadSpec& spec = plan[static_cast<size_t>(h)];
    detail::cpu_kind(spec.kind).reduce(params, h, partial(0, h), int64_t(H) * sz.partial_per_head, dims.B, T, D);
  }
}

#define HW_INSTANTIATE(F)                                                                                           \
  template void layer_forward<F>(const LayerPlan&, const LayerLayout&, const AttnDims&, const LayerHeadParams<F>&,  \
                                 const F*, F*, F*, F*);                                                             \
  template void layer_backward<F>(const LayerPlan&, const LayerLayout&, const AttnDims&, const LayerHeadParams<F>&, \
                                  const F*, const F*, const F*, const F*, F*, F*);
HW_INSTANTIATE(float)
HW_INSTANTIATE(double)
#undef HW_INSTANTIATE

}  // namespace hw::attn
