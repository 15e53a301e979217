// The layer entry point: checks the inputs, then dispatches every (sequence, head) to its
// kind's math. Forward tasks are (b, query head): each writes its own output block and
// row statistics. Backward tasks are (b, KV group): the query heads of a group share K/V
// gradient blocks, so one task owns them and adds the heads' shares in head order. Parameter
// gradients (static alpha/rho, linear L) are summed over b, so tasks write per-(b, head)
// partials that are reduced in b order after the parallel region: deterministic, no atomics.
// A single task runs on the calling thread (waking the team would cost more than it saves).
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attention/head_kernels.hpp"
#include "attention/tile_ops.hpp"
#include "headwise/attention/attention.hpp"
#include "headwise/core/error.hpp"

namespace hw::attn {
namespace {

using detail::HeadBwd;
using detail::HeadFwd;

struct Sizes {
  int64_t partial_per_head = 0;  // backward parameter-gradient partials per (b, head)
  int64_t per_thread = 0;        // scratch of one thread
};

Sizes sizes(const LayerPlan& plan, const LayerLayout& layout, const AttnDims& dims) {
  const int D = layout.head_dim;
  Sizes s;
  for (const HeadSpec& h : plan) {
    if (h.softmax_family()) s.per_thread = std::max(s.per_thread, detail::softmax_scratch(D));
    if (h.kind == HeadKind::Static) {
      s.per_thread = std::max(s.per_thread, detail::static_scratch(D));
      s.partial_per_head = std::max(s.partial_per_head, 2 * dims.T);
    }
    if (h.kind == HeadKind::Linear) {  // n_groups <= head_dim is enforced, so size for G = D
      s.per_thread = std::max(s.per_thread, detail::linear_scratch(D, D));
      s.partial_per_head = std::max(s.partial_per_head, int64_t(D + 1) * (D + 1));
    }
    if (h.kind == HeadKind::Performer) s.per_thread = std::max(s.per_thread, detail::performer_scratch(D, h.features));
    if (h.kind == HeadKind::DiJiang) {
      s.per_thread = std::max(s.per_thread, detail::dijiang_scratch(D));
      s.partial_per_head = std::max(s.partial_per_head, int64_t(D));
    }
    if (h.kind == HeadKind::TaylorShift) {
      s.per_thread = std::max(s.per_thread, detail::taylorshift_scratch(D));
      s.partial_per_head = std::max(s.partial_per_head, int64_t(1));
    }
  }
  return s;
}

std::string head_name(int h) { return "attention: head " + std::to_string(h); }

template <class F>
void check_inputs(const LayerPlan& plan, const LayerLayout& layout, const AttnDims& dims,
                  const LayerHeadParams<F>& params) {
  check(plan.size() == static_cast<size_t>(layout.n_head),
        "attention: plan has " + std::to_string(plan.size()) + " heads, layout has " + std::to_string(layout.n_head));
  check(dims.B >= 0 && dims.T >= 0, "attention: negative batch or sequence length");
  for (int h = 0; h < layout.n_head; ++h) {
    const HeadSpec& s = plan[static_cast<size_t>(h)];
    if (const std::string why = s.invalid_reason(); !why.empty()) fail(head_name(h) + ": " + why);
    if (s.kind == HeadKind::Static) {
      check(params.statics.size() > static_cast<size_t>(h), head_name(h) + " is static but has no parameters");
      const auto& p = params.statics[static_cast<size_t>(h)];
      check(p.alpha && p.rho && p.log_z, head_name(h) + " is static but alpha, rho or log_z is null");
    }
    if (s.kind == HeadKind::Linear) {
      check(params.linears.size() > static_cast<size_t>(h), head_name(h) + " is linear but has no parameters");
      const auto& p = params.linears[static_cast<size_t>(h)];
      check(p.L && p.groups, head_name(h) + " is linear but L or groups is null");
      check(p.n_groups >= 1 && p.n_groups <= layout.head_dim,
            head_name(h) + " has n_groups " + std::to_string(p.n_groups) + " (must be 1..head_dim)");
      for (int r = 0; r < layout.head_dim; ++r)
        check(p.groups[r] >= 1 && p.groups[r] <= p.n_groups,
              head_name(h) + ": groups[" + std::to_string(r) + "] = " + std::to_string(p.groups[r]) +
                  " outside 1.." + std::to_string(p.n_groups));
      check(params.linear_eps > 0 && std::isfinite(params.linear_eps),
            "attention: linear_eps must be positive and finite");
    }
    if (s.kind == HeadKind::Performer) {
      check(params.performers.size() > static_cast<size_t>(h) && params.performers[size_t(h)].W,
            head_name(h) + " is a performer head but has no random features");
      check(params.performers[size_t(h)].n_features == s.features,
            head_name(h) + " is '" + s.str() + "' but its feature matrix has " +
                std::to_string(params.performers[size_t(h)].n_features) + " rows");
    }
    if (s.kind == HeadKind::DiJiang)
      check(params.dijiangs.size() > static_cast<size_t>(h) && params.dijiangs[size_t(h)].log_w,
            head_name(h) + " is a dijiang head but has no weights");
    if (s.kind == HeadKind::TaylorShift) {
      check(params.taylorshifts.size() > static_cast<size_t>(h) && params.taylorshifts[size_t(h)].tau,
            head_name(h) + " is a taylorshift head but has no temperature");
      check(std::isfinite(double(*params.taylorshifts[size_t(h)].tau)),
            head_name(h) + ": taylorshift temperature is not finite");
    }
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
    if (spec.kind == HeadKind::Pruned || spec.kind == HeadKind::Static) std::fill(stats, stats + T, F(0));
    if (spec.kind == HeadKind::Pruned) continue;  // no output block, no work
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
    switch (spec.kind) {
      case HeadKind::Softmax:
      case HeadKind::Window:
      case HeadKind::SinkWindow: detail::softmax_family_forward(detail::key_set(spec, T), a); break;
      case HeadKind::Static: detail::static_forward(params.statics[static_cast<size_t>(h)], a); break;
      case HeadKind::Linear:
        bad[size_t(task)] = detail::linear_forward(params.linears[static_cast<size_t>(h)], params.linear_eps, a);
        break;
      case HeadKind::Performer:
        bad[size_t(task)] = detail::performer_forward(params.performers[static_cast<size_t>(h)], a);
        break;
      case HeadKind::DiJiang: bad[size_t(task)] = detail::dijiang_forward(params.dijiangs[static_cast<size_t>(h)], a); break;
      case HeadKind::TaylorShift:
        bad[size_t(task)] = detail::taylorshift_forward(params.taylorshifts[static_cast<size_t>(h)], a);
        break;
      case HeadKind::Pruned: break;
    }
  }
  // A kernel head stops at its first bad denominator and reports its position here (an
  // exception must not leave the OpenMP region).
  for (int64_t task = 0; task < n_tasks; ++task)
    if (bad[size_t(task)] >= 0) {
      const HeadSpec& spec = plan[static_cast<size_t>(task % H)];
      fail("attention: " + std::string(spec.kind == HeadKind::Linear ? "linear" : spec.str()) + " head " +
           std::to_string(task % H) + " (sequence " + std::to_string(task / H) +
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
      if (spec.kind == HeadKind::Pruned) continue;
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
      switch (spec.kind) {
        case HeadKind::Softmax:
        case HeadKind::Window:
        case HeadKind::SinkWindow: detail::softmax_family_backward(detail::key_set(spec, T), a); break;
        case HeadKind::Static: {
          const auto& p = params.statics[static_cast<size_t>(h)];
          detail::static_backward(p, a, p.dalpha ? partial(b, h) : nullptr, p.drho ? partial(b, h) + T : nullptr);
          break;
        }
        case HeadKind::Linear:
          detail::linear_backward(params.linears[static_cast<size_t>(h)], params.linear_eps, a, partial(b, h));
          break;
        case HeadKind::Performer: detail::performer_backward(params.performers[static_cast<size_t>(h)], a); break;
        case HeadKind::DiJiang: {
          const auto& p = params.dijiangs[static_cast<size_t>(h)];
          detail::dijiang_backward(p, a, p.dlog_w ? partial(b, h) : nullptr);
          break;
        }
        case HeadKind::TaylorShift: {
          const auto& p = params.taylorshifts[static_cast<size_t>(h)];
          detail::taylorshift_backward(p, a, p.dtau ? partial(b, h) : nullptr);
          break;
        }
        case HeadKind::Pruned: break;
      }
    }
  }
  // Parameter gradients: reduce the per-sequence partials in b order.
  for (int h = 0; h < H; ++h) {
    const HeadSpec& spec = plan[static_cast<size_t>(h)];
    if (spec.kind == HeadKind::Static) {
      const auto& p = params.statics[static_cast<size_t>(h)];
      for (int64_t b = 0; b < dims.B; ++b) {
        if (p.dalpha)
          for (int64_t j = 0; j < T; ++j) p.dalpha[j] += partial(b, h)[j];
        if (p.drho)
          for (int64_t j = 0; j < T; ++j) p.drho[j] += partial(b, h)[T + j];
      }
    } else if (spec.kind == HeadKind::DiJiang) {
      const auto& p = params.dijiangs[static_cast<size_t>(h)];
      if (p.dlog_w)
        for (int64_t b = 0; b < dims.B; ++b)
          for (int f = 0; f < D; ++f) p.dlog_w[f] += partial(b, h)[f];
    } else if (spec.kind == HeadKind::TaylorShift) {
      const auto& p = params.taylorshifts[static_cast<size_t>(h)];
      if (p.dtau)
        for (int64_t b = 0; b < dims.B; ++b) *p.dtau += partial(b, h)[0];
    } else if (spec.kind == HeadKind::Linear && dims.B > 0) {
      const auto& p = params.linears[static_cast<size_t>(h)];
      if (!p.dL) continue;
      const int G1 = p.n_groups + 1;
      F* A = partial(0, h);
      for (int64_t b = 1; b < dims.B; ++b)
        for (int e = 0; e < G1 * G1; ++e) A[e] += partial(b, h)[e];
      // kappa = eps + s^T L L^T s: dL = 2 A L on the lower triangle (the upper is not a parameter)
      for (int r = 0; r < G1; ++r)
        for (int c = 0; c <= r; ++c) {
          F s = F(0);
          for (int e = c; e < G1; ++e) s += A[r * G1 + e] * p.L[e * G1 + c];
          p.dL[r * G1 + c] += F(2) * s;
        }
    }
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
