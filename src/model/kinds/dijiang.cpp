// DiJiang heads on the model side (valued_kind.hpp): the log of the head_dim positive feature
// weights, trained, h.{l}.attn.dijiang.{h}.log_w [head_dim], starting at 0 (weights 1). The math
// is src/attention/dijiang_head.cpp.
#include "headwise/core/error.hpp"
#include "model/kinds/valued_kind.hpp"

namespace hw {

DiJiangHeadValues default_dijiang_values(int head_dim) {
  DiJiangHeadValues v;
  v.log_w.assign(size_t(head_dim), 0.f);
  return v;
}

namespace {

class DiJiangKind final : public ValuedKindOf<DiJiangKind, DiJiangHeadValues, &HeadExtras::dijiangs> {
 public:
  attn::HeadKind kind() const override { return attn::HeadKind::DiJiang; }
  const char* name() const override { return "dijiang"; }
  std::vector<KindTensor> tensors(const ModelConfig& c, const attn::HeadSpec&) const override {
    return {{"log_w", {c.head_dim()}, true, 0.f}};
  }
  KindHeadValues values(const ModelConfig& c, const HeadExtras& extras, int l, int h) const override {
    const DiJiangHeadValues* e = entry(extras, l, h);
    const DiJiangHeadValues v = e ? *e : default_dijiang_values(c.head_dim());
    check(int64_t(v.log_w.size()) == c.head_dim(), "dijiang head (" + std::to_string(l) + ", " + std::to_string(h) +
                                                         "): log_w must be head_dim long");
    return {v.log_w};
  }
  void store(const ModelConfig&, HeadExtras& extras, int l, int h, KindHeadValues v) const override {
    slot(extras, l, h).log_w = std::move(v[0]);
  }
  template <class F>
  static void bind_as(attn::LayerHeadParams<F>& p, int n_head, int h, const attn::HeadSpec&, F* const* values,
                      F* const* grads) {
    p.dijiangs.resize(size_t(n_head));
    p.dijiangs[size_t(h)] = {values[0], grads[0]};
  }
};

}  // namespace

const ValuedKind& dijiang_kind() {
  static const DiJiangKind k{};
  return k;
}

}  // namespace hw
