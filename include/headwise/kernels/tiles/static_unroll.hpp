#pragma once
// A loop unrolled at compile time, for host+device tile code that indexes register arrays by the
// loop variable: the index becomes a constant (std::integral_constant), so an array such as a warp's
// mma fragments stays in registers instead of local memory. `#pragma unroll` is not an option in
// HW_HOST_DEVICE code (the host compiler warns about it), and nvcc's own unrolling gives up on
// large bodies (it left the P fragments of the head_dim-128 P V product in local memory).
//   unroll<N>([&](auto i) { acc[i] += ...; });   // i = 0, 1, ..., N - 1 in order
#include <type_traits>
#include <utility>

#include "headwise/kernels/tiles/host_device.hpp"

namespace hw::tiles {

template <class F, int... I>
HW_HOST_DEVICE void unroll_sequence(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}

template <int N, class F>
HW_HOST_DEVICE void unroll(F&& f) {
  unroll_sequence(f, std::make_integer_sequence<int, N>{});
}

}  // namespace hw::tiles
