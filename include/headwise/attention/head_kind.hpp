#pragma once
// The kinds a query head can have: the one definition every backend uses. The CUDA kernels and
// the tile scheduler store a kind as one byte; their named constants are these values
// (kernels/tiles/attention_schedule.hpp, kernels/cuda/attention_params.hpp), so adding a kind
// here is the only enum to change. No dependencies, so device code can include it.
#include <cstdint>

namespace hw::attn {

// New kinds go at the end: device code tests `kind <= kSinkWindow` for the softmax family.
enum class HeadKind : uint8_t { Softmax, Window, SinkWindow, Static, Linear, Pruned, Performer, DiJiang, TaylorShift };

// Each kind's name in plans (config.json "head_plan"; head_plan.cpp parses and prints through
// this), the text forms a plan accepts (for error messages), and whether it is a linearization
// baseline (a feature-map kernel with a causal prefix state: OAL's comparison rows, refused by the
// CUDA path). A switch without a default, so a new enum value without its row is a -Wswitch warning.
struct KindInfo {
  const char* name;
  const char* forms;
  bool baseline_linear;
};
constexpr KindInfo kind_info(HeadKind k) {
  switch (k) {
    case HeadKind::Softmax: return {"softmax", "softmax", false};
    case HeadKind::Window: return {"window", "window:W", false};
    case HeadKind::SinkWindow: return {"sink_window", "sink_window:S:W", false};
    case HeadKind::Static: return {"static", "static", false};
    case HeadKind::Linear: return {"linear", "linear", false};
    case HeadKind::Pruned: return {"pruned", "pruned", false};
    case HeadKind::Performer: return {"performer", "performer, performer:M", true};
    case HeadKind::DiJiang: return {"dijiang", "dijiang", true};
    case HeadKind::TaylorShift: return {"taylorshift", "taylorshift", true};
  }
  return {nullptr, nullptr, false};  // a byte past the last kind
}
// The number of kinds: the first byte without a row.
constexpr int kind_count() {
  int n = 0;
  while (kind_info(static_cast<HeadKind>(n)).name != nullptr) ++n;
  return n;
}

// The byte a kernel stores for a kind.
constexpr uint8_t kind_byte(HeadKind k) { return static_cast<uint8_t>(k); }

// The same bytes by name, for code that stores kinds as bytes (the tile scheduler, the CUDA head
// descriptors: `using namespace attn::kind_bytes;`).
namespace kind_bytes {
constexpr uint8_t kSoftmax = kind_byte(HeadKind::Softmax);
constexpr uint8_t kWindow = kind_byte(HeadKind::Window);
constexpr uint8_t kSinkWindow = kind_byte(HeadKind::SinkWindow);
constexpr uint8_t kStatic = kind_byte(HeadKind::Static);
constexpr uint8_t kLinear = kind_byte(HeadKind::Linear);
constexpr uint8_t kPruned = kind_byte(HeadKind::Pruned);
constexpr uint8_t kPerformer = kind_byte(HeadKind::Performer);
constexpr uint8_t kDiJiang = kind_byte(HeadKind::DiJiang);
constexpr uint8_t kTaylorShift = kind_byte(HeadKind::TaylorShift);
}  // namespace kind_bytes

}  // namespace hw::attn
