#pragma once
// The kinds a query head can have: the one definition every backend uses. The CUDA kernels and
// the tile scheduler store a kind as one byte; their named constants are these values
// (kernels/tiles/attention_schedule.hpp, kernels/cuda/attention_params.hpp), so adding a kind
// here is the only enum to change. No dependencies, so device code can include it.
#include <cstdint>

namespace hw::attn {

enum class HeadKind : uint8_t { Softmax, Window, SinkWindow, Static, Linear, Pruned };

// The byte a kernel stores for a kind.
constexpr uint8_t kind_byte(HeadKind k) { return static_cast<uint8_t>(k); }

}  // namespace hw::attn
