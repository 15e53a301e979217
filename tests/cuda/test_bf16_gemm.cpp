// The mixed-precision GEMMs (GemmLt's bf16 overloads, through the backend's bf16_ops) against
// the CPU double reference on the same bf16 values: forward in both weight layouts with and
// without bias, the fused GELU epilogue and its fallback, backward accumulating into bf16
// dinp and fp32 dW/dbias; plan reuse with the data types in the plan key; and the backend's
// bf16_ops being there, rounding the weight copy exactly as hw::to_bf16 does.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

#include "cuda/cuda_test_util.hpp"
#include "headwise/core/error.hpp"
#include "kernels/cuda/cuda_stream.hpp"
#include "kernels/cuda/gemm_lt.hpp"

namespace hw::cudatest {
namespace {

// bf16 outputs carry one rounding (relative 2^-9 per element), well inside this.
constexpr double kBf16Tol = 1e-2;

using Shape = std::tuple<int64_t, int64_t, int64_t>;
// A GPT-2-like layer and an odd shape (rows not a multiple of 8 bf16 elements).
const std::vector<Shape> kShapes = {{128, 256, 384}, {37, 50, 70}};

const ComputeOps<bf16, float>& bf16_ops() {
  const ComputeOps<bf16, float>* ops = exact_backend().bf16_ops();
  REQUIRE(ops != nullptr);
  return *ops;
}

TEST_CASE("cuda bf16 matmul_forward matches the double reference in both layouts, with and without bias") {
  const auto& be = exact_backend();
  const auto& ops = bf16_ops();
  for (auto [N, I, O] : kShapes) {
    for (bool w_out_in : {false, true}) {
      for (bool with_bias : {true, false}) {
        INFO("N=" << N << " I=" << I << " O=" << O << " w_out_in=" << w_out_in << " bias=" << with_bias);
        Bf16Twin inp(be, random_vector(N * I, 1)), w(be, random_vector(I * O, 2)), bias(be, random_vector(O, 3));
        Bf16Twin out(be, random_vector(N * O, 4));  // overwritten
        ops.matmul_forward(out.d(), inp.d(), w.d(), with_bias ? bias.d() : nullptr, N, I, O, w_out_in);
        reference().matmul_forward(out.r(), inp.r(), w.r(), with_bias ? bias.r() : nullptr, N, I, O, w_out_in);
        CHECK(out.err(be) <= kBf16Tol);
      }
    }
  }
}

TEST_CASE("cuda bf16 GELU epilogue gives pre and gelu(pre) in bf16, and shapes it cannot take are refused") {
  const auto& be = exact_backend();  // ordered uploads and downloads
  cuda::Stream stream;
  DeviceArray<float> workspace((int64_t(32) << 20) / 4);
  const cuda::GemmLt gemm(stream.get(), workspace.get(), workspace.bytes(), cuda::GemmPrecision::Fp32);
  for (auto [N, I, O] : kShapes) {
    for (bool w_out_in : {false, true}) {
      INFO("N=" << N << " I=" << I << " O=" << O << " w_out_in=" << w_out_in);
      Bf16Twin inp(be, random_vector(N * I, 11)), w(be, random_vector(I * O, 12)), bias(be, random_vector(O, 13));
      Bf16Twin pre(be, random_vector(N * O, 14)), out(be, random_vector(N * O, 15));
      const bool fused = gemm.matmul_gelu_forward(pre.d(), out.d(), inp.d(), w.d(), bias.d(), N, I, O, w_out_in);
      stream.synchronize();
      if (O % 8 != 0) {
        CHECK_FALSE(fused);  // the aux leading dimension must be a multiple of 8
        continue;
      }
      CHECK(fused);  // cuBLASLt took the epilogue (a CHECK: the other shapes still run if not)
      if (!fused) continue;
      reference().matmul_gelu_forward(pre.r(), out.r(), inp.r(), w.r(), bias.r(), N, I, O, w_out_in);
      CHECK(pre.err(be) <= kBf16Tol);
      CHECK(out.err(be) <= kBf16Tol);
    }
  }
}

TEST_CASE("cuda bf16_ops matmul_gelu_forward (GEMM then GELU, and the opt-in epilogue) matches the reference") {
  const auto fused_backend = make_cuda_backend({.tf32 = false, .gelu_epilogue = true});
  for (const Backend<float>* be : {&exact_backend(), static_cast<const Backend<float>*>(fused_backend.get())}) {
    const ComputeOps<bf16, float>* ops = be->bf16_ops();
    REQUIRE(ops != nullptr);
    for (auto [N, I, O] : kShapes) {
      INFO(be->name() << " N=" << N << " I=" << I << " O=" << O);
      Bf16Twin inp(*be, random_vector(N * I, 21)), w(*be, random_vector(I * O, 22)), bias(*be, random_vector(O, 23));
      Bf16Twin pre(*be, random_vector(N * O, 24)), out(*be, random_vector(N * O, 25));
      ops->matmul_gelu_forward(pre.d(), out.d(), inp.d(), w.d(), bias.d(), N, I, O, false);
      reference().matmul_gelu_forward(pre.r(), out.r(), inp.r(), w.r(), bias.r(), N, I, O, false);
      CHECK(pre.err(*be) <= kBf16Tol);
      CHECK(out.err(*be) <= kBf16Tol);
    }
  }
}

TEST_CASE("cuda bf16 matmul_backward accumulates dinp in bf16 and dW, dbias in fp32") {
  const auto& be = exact_backend();
  const auto& ops = bf16_ops();
  for (auto [N, I, O] : kShapes) {
    for (bool w_out_in : {false, true}) {
      INFO("N=" << N << " I=" << I << " O=" << O << " w_out_in=" << w_out_in);
      Bf16Twin inp(be, random_vector(N * I, 31)), w(be, random_vector(I * O, 32)), dout(be, random_vector(N * O, 33));
      // Pre-filled, non-zero gradients: an op that overwrote instead of accumulating fails.
      Bf16Twin dinp(be, random_vector(N * I, 34));
      Twin dw(be, random_vector(I * O, 35)), dbias(be, random_vector(O, 36));
      ops.matmul_backward(dinp.d(), dw.d(), dbias.d(), dout.d(), inp.d(), w.d(), N, I, O, w_out_in);
      reference().matmul_backward(dinp.r(), dw.r(), dbias.r(), dout.r(), inp.r(), w.r(), N, I, O, w_out_in);
      CHECK(dinp.err(be) <= kBf16Tol);
      // bf16 x bf16 products are exact in fp32 and dW stays fp32: far tighter than a bf16
      // rounding of dW (about 2e-3) would allow.
      CHECK(dw.err(be) <= 1e-4);
      CHECK(dbias.err(be) <= 1e-5);  // a double column sum stored in fp32
    }
  }
}

TEST_CASE("GemmLt plans: one per shape and data types, reused by later calls") {
  const auto& be = exact_backend();
  const int64_t N = 64, I = 96, O = 128;
  cuda::Stream stream;
  DeviceArray<float> workspace((int64_t(32) << 20) / 4);
  const cuda::GemmLt gemm(stream.get(), workspace.get(), workspace.bytes(), cuda::GemmPrecision::Fp32);
  const auto f_inp = upload(be, random_vector(N * I, 41)), f_w = upload(be, random_vector(I * O, 42));
  const auto b_inp = upload_bf16(be, random_vector(N * I, 41)), b_w = upload_bf16(be, random_vector(I * O, 42));
  const auto b_dout = upload_bf16(be, random_vector(N * O, 43));
  DeviceArray<float> f_out(N * O), dw(I * O);
  DeviceArray<bf16> b_out(N * O), dinp(N * I);
  be.copy_to_device(dw.get(), std::vector<float>(static_cast<size_t>(I * O), 0.0f).data(), dw.bytes());
  be.copy_to_device(dinp.get(), std::vector<bf16>(static_cast<size_t>(N * I)).data(), dinp.bytes());

  for (int run = 0; run < 2; run++) {
    INFO("run " << run);
    gemm.matmul_forward(f_out.get(), f_inp->get(), f_w->get(), nullptr, N, I, O, false);
    CHECK(gemm.plan_count() == 1);
    gemm.matmul_forward(b_out.get(), b_inp->get(), b_w->get(), nullptr, N, I, O, false);
    CHECK(gemm.plan_count() == 2);  // same shape, bf16 data: a plan of its own
    gemm.matmul_backward(dinp.get(), dw.get(), b_dout->get(), b_inp->get(), b_w->get(), N, I, O, false);
    CHECK(gemm.plan_count() == 4);  // dinp (bf16 C/D) and dW (fp32 C/D)
  }
  stream.synchronize();
}

// Raw fp32 bit patterns: the rounding's edge cases next to ordinary values.
std::vector<float> rounding_inputs() {
  const uint32_t patterns[] = {
      0x00000000u, 0x80000000u,  // +-0
      0x3f808000u, 0x3f818000u,  // exact ties: down to even, up to even
      0x3f808001u, 0x3f807fffu,  // just above and below a tie
      0x00000001u, 0x807fffffu,  // subnormals
      0x7f7fffffu, 0xff7fffffu,  // largest finite: round to +-inf
      0x7f800000u, 0xff800000u,  // +-inf
  };
  std::vector<float> v = random_vector(1000, 51, -3.0f, 3.0f);
  for (uint32_t p : patterns) {
    float f = 0.0f;
    std::memcpy(&f, &p, sizeof(f));
    v.push_back(f);
  }
  v.push_back(std::numeric_limits<float>::quiet_NaN());
  return v;
}

TEST_CASE("cuda backend offers bf16_ops, and round_weights rounds exactly as hw::to_bf16") {
  const auto& be = exact_backend();
  const ComputeOps<bf16, float>* ops = be.bf16_ops();
  REQUIRE(ops != nullptr);
  REQUIRE(make_cuda_backend()->bf16_ops() != nullptr);  // the TF32 training backend too

  const std::vector<float> src = rounding_inputs();
  const int64_t n = static_cast<int64_t>(src.size());
  const auto d_src = upload(be, src);
  DeviceArray<bf16> dst(n);
  ops->round_weights(dst.get(), d_src->get(), n);
  const std::vector<bf16> got = download(be, dst);
  for (size_t i = 0; i < src.size(); i++) {
    INFO("i=" << i << " x=" << src[i]);
    if (std::isnan(src[i])) {
      CHECK(std::isnan(to_float(got[i])));  // NaN stays NaN (its payload is not part of the contract)
    } else {
      CHECK(got[i].bits == to_bf16(src[i]).bits);
    }
  }
}

TEST_CASE("cuda bf16_ops rope refuses the CPU reference's bad arguments") {
  const auto& ops = bf16_ops();
  CHECK_THROWS_AS(ops.rope_forward(nullptr, 1, 1, 3, 0, 1, 3, 10000.0), Error);  // odd head width
  CHECK_THROWS_AS(ops.rope_backward(nullptr, 1, 1, 4, 0, 1, 4, 0.0), Error);     // theta 0
}

}  // namespace
}  // namespace hw::cudatest
