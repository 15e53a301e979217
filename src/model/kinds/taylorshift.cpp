// TaylorShift heads on the model side (valued_kind.hpp): one trained temperature tau per head,
// h.{l}.attn.taylorshift.{h}.tau [1], starting at 1. The math is src/attention/taylorshift_head.cpp.
#include <cmath>

#include "headwise/core/error.hpp"
#include "model/kinds/valued_kind.hpp"

namespace hw {

TaylorShiftHeadValues default_taylorshift_values() { return {}; }

namespace {

class TaylorShiftKind final : public ValuedKindOf<TaylorShiftKind, TaylorShiftHeadValues, &HeadExtras::taylorshifts> {
 public:
  attn::HeadKind kind() const override { return attn::HeadKind::TaylorShift; }
  const char* name() const override { return "taylorshift"; }
  std::vector<KindTensor> tensors(const ModelConfig&, const attn::HeadSpec&) const override {
    return {{"tau", {1}, true, 1.f}};
  }
  KindHeadValues values(const ModelConfig&, const HeadExtras& extras, int l, int h) const override {
    const TaylorShiftHeadValues* e = entry(extras, l, h);
    const TaylorShiftHeadValues v = e ? *e : default_taylorshift_values();
    check(std::isfinite(v.tau), "taylorshift head (" + std::to_string(l) + ", " + std::to_string(h) +
                                    "): tau must be finite");
    return {{v.tau}};
  }
  void store(const ModelConfig&, HeadExtras& extras, int l, int h, KindHeadValues v) const override {
    slot(extras, l, h).tau = v[0][0];
  }
  template <class F>
  static void bind_as(attn::LayerHeadParams<F>& p, int n_head, int h, const attn::HeadSpec&, F* const* values,
                      F* const* grads) {
    p.taylorshifts.resize(size_t(n_head));
    p.taylorshifts[size_t(h)] = {values[0], grads[0]};
  }
};

}  // namespace

const ValuedKind& taylorshift_kind() {
  static const TaylorShiftKind k{};
  return k;
}

}  // namespace hw
