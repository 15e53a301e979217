// The CPU table of head kinds (kind_table.hpp): one line per kind, its entry in its own file.
// Pruned heads have no math and no file, so their entry is here.
#include "attention/kind_table.hpp"

#include <array>

#include "headwise/core/error.hpp"

namespace hw::attn::detail {

const CpuKind& softmax_cpu_kind();
const CpuKind& window_cpu_kind();
const CpuKind& sink_window_cpu_kind();
const CpuKind& static_cpu_kind();
const CpuKind& linear_cpu_kind();
const CpuKind& performer_cpu_kind();
const CpuKind& dijiang_cpu_kind();
const CpuKind& taylorshift_cpu_kind();

namespace {

// No output block, zero row statistics, no work; counts nothing; a row of the per-kind bench.
class PrunedKind final : public CpuKindOf<PrunedKind> {
 public:
  HeadKind kind() const override { return HeadKind::Pruned; }
  bool computes() const override { return false; }
  int64_t scratch(const HeadSpec&, int) const override { return 0; }
  double flops(const HeadSpec&, int64_t, double) const override { return 0; }
  std::vector<BenchCase> bench_rows(int64_t) const override { return {{"pruned", {HeadKind::Pruned, 0, 0}}}; }
  // never called: computes() is false
  template <class F>
  int64_t forward_as(const LayerHeadParams<F>&, int, const HeadSpec&, const HeadFwd<F>&) const {
    return -1;
  }
  template <class F>
  void backward_as(const LayerHeadParams<F>&, int, const HeadSpec&, const HeadBwd<F>&, F*) const {}
};

const CpuKind& pruned_cpu_kind() {
  static const PrunedKind k{};
  return k;
}

}  // namespace

const std::vector<const CpuKind*>& cpu_kinds() {
  static const std::vector<const CpuKind*> all = {
      &softmax_cpu_kind(), &window_cpu_kind(),    &sink_window_cpu_kind(), &static_cpu_kind(),
      &linear_cpu_kind(),  &pruned_cpu_kind(),    &performer_cpu_kind(),   &dijiang_cpu_kind(),
      &taylorshift_cpu_kind()};
  return all;
}

const CpuKind* find_cpu_kind(HeadKind k) {
  // indexed by the kind's byte: one load per (sequence, head) task
  static const std::array<const CpuKind*, 256> by_byte = [] {
    std::array<const CpuKind*, 256> a{};
    for (const CpuKind* e : cpu_kinds()) {
      check(!a[kind_byte(e->kind())], "attention: two CPU entries for one head kind");
      a[kind_byte(e->kind())] = e;
    }
    return a;
  }();
  return by_byte[kind_byte(k)];
}

}  // namespace hw::attn::detail
