// The table of model families (family.hpp): one line per family file.
#include "model/family/family.hpp"

#include "headwise/core/error.hpp"

namespace hw {

extern const ModelFamily kGpt2Family, kLlamaFamily, kQwen2Family, kQwen3Family;

const std::vector<const ModelFamily*>& model_families() {
  static const std::vector<const ModelFamily*> all = {&kGpt2Family, &kLlamaFamily, &kQwen2Family, &kQwen3Family};
  return all;
}

const ModelFamily* find_family(const std::string& name) {
  for (const ModelFamily* f : model_families())
    if (name == f->name) return f;
  return nullptr;
}

const ModelFamily& family_named(const std::string& name) {
  const ModelFamily* f = find_family(name);
  check(f != nullptr, "model.family must be " + family_names("\"", " or ") + ", got \"" + name + "\"");
  return *f;
}

HfModule lora_module(const ModelFamily& f, int layer, LoraTarget t) {
  if (f.fused_qkv && (t == LoraTarget::K || t == LoraTarget::V)) t = LoraTarget::Q;
  for (HfModule& m : f.lora_modules(layer))
    if (m.target == int(t)) return m;
  fail(std::string("internal: family ") + f.name + " has no module for LoRA target " + lora_target_name(t));
}

std::string family_names(const std::string& quote, const std::string& last) {
  const auto& all = model_families();
  std::string out;
  for (size_t i = 0; i < all.size(); ++i) {
    if (i > 0) out += i + 1 == all.size() ? last : ", ";
    out += quote + all[i]->name + quote;
  }
  return out;
}

}  // namespace hw
