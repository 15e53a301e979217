// Plan changes in place: install_plan, its cheap path when the parameter layout stays
// (install_keeping_layout), and the test for that path (keeps_layout).
#include <iterator>
#include <string>
#include <vector>

#include "headwise/model/device_copy.hpp"
#include "model/kinds/valued_kind.hpp"
#include "model/model_impl.hpp"

namespace hw {

template <class F>
bool Model<F>::install_plan(const attn::HeadPlan& plan, const HeadExtras& extras) {
  plan.validate(cfg_.n_layer, cfg_.n_head);
  if (install_keeping_layout(plan, extras)) return true;
  // Keep the values of heads whose kind stays, unless the planner gives new ones.
  HeadExtras merged = head_extras();
  for (auto it = merged.statics.begin(); it != merged.statics.end();)
    it = plan.layers[size_t(it->first.first)][size_t(it->first.second)].kind == attn::HeadKind::Static
             ? std::next(it)
             : merged.statics.erase(it);
  for (auto it = merged.linears.begin(); it != merged.linears.end();)
    it = plan.layers[size_t(it->first.first)][size_t(it->first.second)].kind == attn::HeadKind::Linear
             ? std::next(it)
             : merged.linears.erase(it);
  for (const ValuedKind* k : valued_kinds()) k->keep_for(merged, plan);
  for (const auto& [k, v] : extras.statics) merged.statics[k] = v;
  for (const auto& [k, v] : extras.linears) merged.linears[k] = v;
  for (const ValuedKind* k : valued_kinds()) k->merge(merged, extras);

  ModelConfig next = cfg_;
  next.head_plan = plan;
  rebuild_keeping_values(next, merged);
  // Linear L values come from `merged` (set in build) when the planner gives them.
  for (const auto& [k, v] : extras.linears) {
    Tensor& L = params_.get("h." + std::to_string(k.first) + ".attn.linear." + std::to_string(k.second) + ".L");
    write_device(ops_, L.as<F>(), std::vector<F>(v.L.begin(), v.L.end()));
  }
  // Likewise the valued kinds' trained values (their buffers: build() wrote them).
  for (const ValuedKind* k : valued_kinds())
    for (const auto& [l, h] : k->heads(extras)) {
      const std::vector<KindTensor> ts = k->tensors(cfg_, cfg_.head_plan.layers[size_t(l)][size_t(h)]);
      bool any_trained = false;
      for (const KindTensor& t : ts) any_trained = any_trained || t.trained;
      if (!any_trained) continue;
      const KindHeadValues v = k->values(cfg_, extras, l, h);
      for (size_t i = 0; i < ts.size(); ++i)
        if (ts[i].trained)
          write_device(ops_, params_.get(kind_tensor_name(*k, l, h, ts[i])).template as<F>(),
                       std::vector<F>(v[i].begin(), v[i].end()));
    }
  return false;
}

// Rebuild the arenas for `next` and move values across by name through the stored shapes:
// trained parameters and frozen weights (model.lora.freeze_base), in either direction, so
// freezing or unfreezing keeps every value. Head values (static alpha/rho, linear groups) come
// from `extras` in build(). The old blocks are not copied: they are swapped out of the model and
// consumed tensor by tensor (move_arena_values: on the CPU each tensor's old pages go back as it
// is moved), so a plan change of a model with no gradients costs about one model of memory, not
// three (the old block, a copy of it and the new one).
template <class F>
void Model<F>::rebuild_keeping_values(const ModelConfig& next, const HeadExtras& extras) {
  Arena old_params{"params.old", ops_.device()}, old_buffers{"buffers.old", ops_.device()};
  old_params.swap(params_);
  old_buffers.swap(buffers_);
  grads_.reset();  // zeroed in the new layout anyway: freed before the new blocks exist
  acts_.reset();
  weights16_.reset();
  const auto old_specs = specs_;
  const auto old_layouts = layouts_;
  cfg_ = next;
  cfg_.validate();
  build(extras);
  std::vector<ParamSpec> frozen_specs;
  for (const auto& s : specs_)
    if (s.frozen) frozen_specs.push_back(s);
  std::vector<ParamSpec> old_frozen;
  for (const auto& s : old_specs)
    if (s.frozen) old_frozen.push_back(s);
  for (Arena* from : {&old_params, &old_buffers}) {
    // Only the old block's model weights move: its head values and normalisers are build()'s.
    const auto& from_specs = from == &old_params ? old_specs : old_frozen;
    move_arena_values<F>(ops_, *from, from_specs, old_layouts, params_, specs_, layouts_);
    move_arena_values<F>(ops_, *from, from_specs, old_layouts, buffers_, frozen_specs, layouts_);
  }
}

template <class F>
bool Model<F>::keeps_layout(const attn::HeadPlan& plan, const HeadExtras& extras) const {
  if (!extras.linears.empty()) return false;  // new linear groups: build() writes groups and L together
  for (const ValuedKind* k : valued_kinds())
    if (k->any(extras)) return false;
  plan.validate(cfg_.n_layer, cfg_.n_head);
  ModelConfig next = cfg_;
  next.head_plan = plan;
  HeadExtras merged = head_extras();  // the values the new specs are derived from
  for (const auto& [k, v] : extras.statics) merged.statics[k] = v;
  const auto next_specs = param_specs(next, merged);
  const auto next_layouts = build_layouts(next);
  auto same_tensor = [](const ParamSpec& a, const ParamSpec& b) {
    return a.name == b.name && a.shape == b.shape && a.stored_shape == b.stored_shape && a.role == b.role &&
           a.map == b.map && a.is_int == b.is_int;
  };
  if (next_specs.size() != specs_.size()) return false;
  for (size_t i = 0; i < specs_.size(); ++i)
    if (!same_tensor(next_specs[i], specs_[i])) return false;
  for (size_t l = 0; l < layouts_.size(); ++l) {
    const auto &a = layouts_[l], &b = next_layouts[l];
    if (a.q_slot != b.q_slot || a.k_slot != b.k_slot || a.v_slot != b.v_slot || a.o_slot != b.o_slot) return false;
  }
  return true;
}

template <class F>
bool Model<F>::install_keeping_layout(const attn::HeadPlan& plan, const HeadExtras& extras) {
  if (!keeps_layout(plan, extras)) return false;
  // Same tensors: the kinds changed only among kinds with the same parameters (softmax, window,
  // sink_window), and static heads are the same heads, whose new values (if any) are written.
  cfg_.head_plan = plan;
  for (const auto& [k, v] : extras.statics) {
    const std::string sp = "h." + std::to_string(k.first) + ".attn.static." + std::to_string(k.second) + ".";
    upload_static_head(v, model_detail::find_ptr<F>(buffers_, sp + "alpha"),
                       model_detail::find_ptr<F>(buffers_, sp + "rho"),
                       model_detail::find_ptr<F>(buffers_, sp + "log_z"));
  }
  return true;
}

// The members defined here, for both model types (the class itself is instantiated once, in
// model.cpp).
template void Model<float>::rebuild_keeping_values(const ModelConfig&, const HeadExtras&);
template void Model<double>::rebuild_keeping_values(const ModelConfig&, const HeadExtras&);
template bool Model<float>::install_plan(const attn::HeadPlan&, const HeadExtras&);
template bool Model<float>::keeps_layout(const attn::HeadPlan&, const HeadExtras&) const;
template bool Model<float>::install_keeping_layout(const attn::HeadPlan&, const HeadExtras&);
template bool Model<double>::install_plan(const attn::HeadPlan&, const HeadExtras&);
template bool Model<double>::keeps_layout(const attn::HeadPlan&, const HeadExtras&) const;
template bool Model<double>::install_keeping_layout(const attn::HeadPlan&, const HeadExtras&);

}  // namespace hw
