#pragma once
// The model side of the head kinds that carry their own values besides Q, K, V and O (the
// linearization baselines): one file each in this folder, listed in kinds.cpp. A kind's file says
// which tensors a head of it has (names, shapes, trained or buffer, initial value), its default
// and checked values, how they are kept in HeadExtras, and which attention parameters point at
// them. The parameter layout, the model (binding, read-back, plan installation) and the
// checkpoint reader iterate over valued_kinds() and name none of these kinds.
// (static and linear heads, whose values shape other tensors, keep their own code.)
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "headwise/attention/attention.hpp"
#include "headwise/attention/head_plan.hpp"
#include "headwise/model/head_extras.hpp"
#include "headwise/model/model_config.hpp"

namespace hw {

// One tensor of a head: h.{l}.attn.<kind name>.{h}.<suffix>.
struct KindTensor {
  std::string suffix;
  std::vector<int64_t> shape;
  bool trained = true;     // a parameter (gradient, AdamW, no weight decay), else a buffer
  float init_value = 0.f;  // the spec's constant initial value (the bound values replace it)
};

// A head's values, one float vector per tensor, in tensors()'s order.
using KindHeadValues = std::vector<std::vector<float>>;

class ValuedKind {
 public:
  virtual ~ValuedKind() = default;
  virtual attn::HeadKind kind() const = 0;
  virtual const char* name() const = 0;  // as in the tensor names
  virtual std::vector<KindTensor> tensors(const ModelConfig& c, const attn::HeadSpec& spec) const = 0;
  // Head (l, h)'s values: extras' entry or the kind's defaults, checked (one error naming the head).
  virtual KindHeadValues values(const ModelConfig& c, const HeadExtras& extras, int l, int h) const = 0;
  // Values read back (from the model or a checkpoint) as extras' entry of head (l, h).
  virtual void store(const ModelConfig& c, HeadExtras& extras, int l, int h, KindHeadValues v) const = 0;
  // extras' entries of this kind: whether any, their heads, dropping those of heads that `plan`
  // no longer gives this kind (or whose values no longer fit its spec), and copying `from`'s over.
  virtual bool any(const HeadExtras& extras) const = 0;
  virtual std::vector<HeadKey> heads(const HeadExtras& extras) const = 0;
  virtual void keep_for(HeadExtras& extras, const attn::HeadPlan& plan) const = 0;
  virtual void merge(HeadExtras& into, const HeadExtras& from) const = 0;
  // Point head h's attention parameters at its tensors: values[i], grads[i] (null for buffers
  // and models without gradients) in tensors()'s order.
  virtual void bind(attn::LayerHeadParams<float>& p, int n_head, int h, const attn::HeadSpec& spec,
                    float* const* values, float* const* grads) const = 0;
  virtual void bind(attn::LayerHeadParams<double>& p, int n_head, int h, const attn::HeadSpec& spec,
                    double* const* values, double* const* grads) const = 0;
};

// The part every kind writes the same way: its entries are HeadExtras::*Map (values of type V),
// and bind in float and double is Kind's one template
//   template <class F> static void bind_as(attn::LayerHeadParams<F>&, int n_head, int h,
//                                          const attn::HeadSpec&, F* const* values, F* const* grads);
template <class Kind, class V, std::map<HeadKey, V> HeadExtras::*Map>
class ValuedKindOf : public ValuedKind {
 public:
  void bind(attn::LayerHeadParams<float>& p, int n_head, int h, const attn::HeadSpec& spec, float* const* values,
            float* const* grads) const final {
    Kind::bind_as(p, n_head, h, spec, values, grads);
  }
  void bind(attn::LayerHeadParams<double>& p, int n_head, int h, const attn::HeadSpec& spec, double* const* values,
            double* const* grads) const final {
    Kind::bind_as(p, n_head, h, spec, values, grads);
  }
  bool any(const HeadExtras& extras) const override { return !(extras.*Map).empty(); }
  std::vector<HeadKey> heads(const HeadExtras& extras) const override {
    std::vector<HeadKey> out;
    for (const auto& kv : extras.*Map) out.push_back(kv.first);
    return out;
  }
  void keep_for(HeadExtras& extras, const attn::HeadPlan& plan) const override {
    auto& m = extras.*Map;
    for (auto it = m.begin(); it != m.end();) {
      const attn::HeadSpec& spec = plan.layers[size_t(it->first.first)][size_t(it->first.second)];
      it = spec.kind == kind() && fits(spec, it->second) ? std::next(it) : m.erase(it);
    }
  }
  void merge(HeadExtras& into, const HeadExtras& from) const override {
    for (const auto& [k, v] : from.*Map) (into.*Map)[k] = v;
  }

 protected:
  // Whether values kept from before a plan change still fit the head's new spec.
  virtual bool fits(const attn::HeadSpec&, const V&) const { return true; }
  // extras' entry of (l, h), or null.
  static const V* entry(const HeadExtras& extras, int l, int h) {
    auto it = (extras.*Map).find({l, h});
    return it != (extras.*Map).end() ? &it->second : nullptr;
  }
  static V& slot(HeadExtras& extras, int l, int h) { return (extras.*Map)[{l, h}]; }
};

// Every valued kind (kinds.cpp), and the one of kind k (null for the others).
const std::vector<const ValuedKind*>& valued_kinds();
const ValuedKind* valued_kind(attn::HeadKind k);
// h.{l}.attn.<kind>.{h}.<suffix>
std::string kind_tensor_name(const ValuedKind& k, int layer, int head, const KindTensor& t);
int64_t kind_tensor_numel(const KindTensor& t);

}  // namespace hw
