#pragma once
// The OAL paper's linearization baselines as conversion targets of the OAL planner
// (`method.kernel`) and as rows of its Table 2: the head kinds performer, dijiang and
// taylorshift (src/attention), with the values a converted head starts from, and a dense
// double evaluation of one head's causal output (for the frozen-attention metrics; the model's
// heads compute the same function with prefix states, tests/oal checks the two agree).
//
// Initial values (neither the paper nor its public code fix them beyond "fixed" / "learnable"):
//   performer:   M = performer_features (250) positive orthogonal random features, fixed, drawn
//                per head from OAL's seed (stream OalBaselineFeatures, index layer * n_head + head);
//   dijiang:     the D positive weights w = 1 (log_w = 0), learnable;
//   taylorshift: the temperature tau = 1, learnable.
// These are the head kinds' own defaults, so a checkpoint naming the kind without values gets the
// same start. None of them is fitted to the softmax outputs before fine-tuning (the paper's output
// calibration is OAL's and the learned global kernel's).
#include <cstdint>
#include <string>
#include <vector>

#include "headwise/attention/head_plan.hpp"
#include "headwise/methods/oal/kernel.hpp"
#include "headwise/model/head_extras.hpp"

namespace hw::oal {

enum class KernelKind { Oal, Performer, DiJiang, TaylorShift };

// "oal" | "performer" | "dijiang" | "taylorshift"; anything else is an error naming `key`.
KernelKind parse_kernel(const std::string& text, const std::string& key);
std::string kernel_name(KernelKind k);

// One baseline head: its kind and the values it starts from.
struct BaselineHead {
  KernelKind kind = KernelKind::Performer;
  PerformerHeadValues performer;  // kind performer
  DiJiangHeadValues dijiang;      // kind dijiang
  TaylorShiftHeadValues taylorshift;
  attn::HeadSpec spec() const;
  void add_to(HeadExtras& extras, int layer, int head) const;
};

// The starting values of head (layer, head) of a model with n_head query heads (see above).
BaselineHead baseline_head(KernelKind kind, int head_dim, int performer_features, uint64_t seed, int layer, int head,
                           int n_head);

// Per-position rows of the head's feature map, [T][M]: performer phi(x), dijiang a(x) (times w on
// the query side); taylorshift the unit rows x / |x| (kappa = 1 + s + s^2/2 of their dot times tau).
std::vector<std::vector<double>> baseline_rows(const HeadRows& h, const BaselineHead& b, bool query);

// The head's causal output at every position, densely over keys j <= i in double: out[T * d].
// A non-positive or non-finite denominator is an error.
void baseline_outputs(const HeadRows& h, const BaselineHead& b, double* out);

}  // namespace hw::oal
