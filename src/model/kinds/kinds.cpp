// The table of valued head kinds (valued_kind.hpp): one line per kind file.
#include "model/kinds/valued_kind.hpp"

namespace hw {

const ValuedKind& performer_kind();
const ValuedKind& dijiang_kind();
const ValuedKind& taylorshift_kind();

const std::vector<const ValuedKind*>& valued_kinds() {
  static const std::vector<const ValuedKind*> all = {&performer_kind(), &dijiang_kind(),
                                                            &taylorshift_kind()};
  return all;
}

const ValuedKind* valued_kind(attn::HeadKind k) {
  for (const ValuedKind* v : valued_kinds())
    if (v->kind() == k) return v;
  return nullptr;
}

std::string kind_tensor_name(const ValuedKind& k, int layer, int head, const KindTensor& t) {
  return "h." + std::to_string(layer) + ".attn." + k.name() + "." + std::to_string(head) + "." + t.suffix;
}

int64_t kind_tensor_numel(const KindTensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

}  // namespace hw
