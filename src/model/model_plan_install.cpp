// Plan changes in place: install_plan, its cheap path when the parameter layout stays
// (install_keeping_layout), and the test for that path (keeps_layout).
#include <iterator>
#include <string>
#include <vector>

#include "headwise/model/device_copy.hpp"
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
  auto keep_kind = [&](auto& values, attn::HeadKind kind) {
    for (auto it = values.begin(); it != values.end();)
      it = plan.layers[size_t(it->first.first)][size_t(it->first.second)].kind == kind ? std::next(it)
                                                                                     : values.erase(it);
  };
  keep_kind(merged.performers, attn::HeadKind::Performer);
  keep_kind(merged.dijiangs, attn::HeadKind::DiJiang);
  keep_kind(merged.taylorshifts, attn::HeadKind::TaylorShift);
  // a performer head whose feature count changes draws new features
  for (auto it = merged.performers.begin(); it != merged.performers.end();)
    it = plan.layers[size_t(it->first.first)][size_t(it->first.second)].features == it->second.n_features
             ? std::next(it)
             : merged.performers.erase(it);
  for (const auto& [k, v] : extras.statics) merged.statics[k] = v;
  for (const auto& [k, v] : extras.linears) merged.linears[k] = v;
  for (const auto& [k, v] : extras.performers) merged.performers[k] = v;
  for (const auto& [k, v] : extras.dijiangs) merged.dijiangs[k] = v;
  for (const auto& [k, v] : extras.taylorshifts) merged.taylorshifts[k] = v;

  ModelConfig next = cfg_;
  next.head_plan = plan;
  rebuild_keeping_values(next, merged);
  // Linear L values come from `merged` (set in build) when the planner gives them.
  for (const auto& [k, v] : extras.linears) {
    Tensor& L = params_.get("h." + std::to_string(k.first) + ".attn.linear." + std::to_string(k.second) + ".L");
    write_device(ops_, L.as<F>(), std::vector<F>(v.L.begin(), v.L.end()));
  }
  // Likewise the baselines' trainable values (performer features are buffers: build() wrote them).
  for (const auto& [k, v] : extras.dijiangs) {
    Tensor& t = params_.get("h." + std::to_string(k.first) + ".attn.dijiang." + std::to_string(k.second) + ".log_w");
    write_device(ops_, t.as<F>(), std::vector<F>(v.log_w.begin(), v.log_w.end()));
  }
  for (const auto& [k, v] : extras.taylorshifts) {
    Tensor& t = params_.get("h." + std::to_string(k.first) + ".attn.taylorshift." + std::to_string(k.second) + ".tau");
    write_device(ops_, t.as<F>(), std::vector<F>{F(v.tau)});
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
  if (!extras.performers.empty() || !extras.dijiangs.empty() || !extras.taylorshifts.empty()) return false;
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
