#pragma once
// The mixed head plans of the bf16 attention parity tests (test_attention_bf16.cpp) and of the
// host-side check of their launch parameters (test_attention_setup_host.cpp, which also runs
// without a GPU in test_emulated).
#include <string>
#include <vector>

namespace hw::cudatest::attn16 {

struct Case {
  std::vector<std::string> plan;
  int kv = 1;
};

inline const std::vector<Case> kCases = {
    // groups of two: (softmax, window), (sink_window, static), (linear, pruned), (softmax, window:1)
    {{"softmax", "window:40", "sink_window:3:50", "static", "linear", "pruned", "softmax", "window:1"}, 4},
    // groups of four mixing linear heads with softmax-family and static ones (fp32 dK/dV staging)
    {{"static", "linear", "softmax", "pruned", "window:100", "linear", "static", "sink_window:64:64"}, 2},
    // a group of static heads only (no K block), a group of linear heads only, a pruned group
    {{"static", "static", "linear", "linear", "pruned", "pruned"}, 3},
};

}  // namespace hw::cudatest::attn16
