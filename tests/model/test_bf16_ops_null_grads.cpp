// The CPU bf16 ops skip a null activation gradient like the fp32 ops ("any gradient pointer may
// be null"), and still give the parameter gradients, checked against double sums of the same
// bf16 values.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <vector>

#include "headwise/core/bf16.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/kernels/backend.hpp"
#include "model/model_test_util.hpp"

using namespace hw;

namespace {

std::vector<bf16> random_bf16(size_t n, Rng& rng) {
  std::vector<bf16> v(n);
  for (auto& x : v) x = to_bf16(float(rng.normal()));
  return v;
}

}  // namespace

TEST_CASE("bf16 matmul_backward with a null dinp gives dW and dbias", "[model][bf16]") {
  const ComputeOps<bf16, float>* ops = cpu_backend<float>().bf16_ops();
  REQUIRE(ops != nullptr);
  const int64_t N = 6, I = 9, O = 5;
  Rng rng(11);
  const auto inp = random_bf16(size_t(N * I), rng), dout = random_bf16(size_t(N * O), rng),
             w = random_bf16(size_t(I * O), rng);
  std::vector<float> dw(size_t(I * O), 0.5f), db(static_cast<size_t>(O), -0.25f);
  ops->matmul_backward(nullptr, dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, I, O);
  std::vector<double> dw_ref(size_t(I * O), 0.5), db_ref(static_cast<size_t>(O), -0.25);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      const double g = to_float(dout[size_t(n * O + o)]);
      db_ref[size_t(o)] += g;
      for (int64_t i = 0; i < I; ++i) dw_ref[size_t(i * O + o)] += double(to_float(inp[size_t(n * I + i)])) * g;
    }
  CHECK(test::max_rel_err(dw, dw_ref) < 1e-5);
  CHECK(test::max_rel_err(db, db_ref) < 1e-5);
}

TEST_CASE("bf16 layernorm_backward with a null dinp gives dweight and dbias", "[model][bf16]") {
  const ComputeOps<bf16, float>* ops = cpu_backend<float>().bf16_ops();
  REQUIRE(ops != nullptr);
  const int64_t N = 4, C = 12;
  Rng rng(12);
  const auto inp = random_bf16(size_t(N * C), rng), dout = random_bf16(size_t(N * C), rng);
  std::vector<float> weight(static_cast<size_t>(C)), bias(static_cast<size_t>(C), 0.0f),
      mean(static_cast<size_t>(N)), rstd(static_cast<size_t>(N));
  for (auto& x : weight) x = float(1.0 + 0.1 * rng.normal());
  std::vector<bf16> out(size_t(N * C));
  ops->layernorm_forward(out.data(), mean.data(), rstd.data(), inp.data(), weight.data(), bias.data(), N, C, 1e-5);
  std::vector<float> dweight(static_cast<size_t>(C), 0.0f), dbias(static_cast<size_t>(C), 1.0f);
  ops->layernorm_backward(nullptr, dweight.data(), dbias.data(), dout.data(), inp.data(), weight.data(), mean.data(),
                          rstd.data(), N, C);
  std::vector<double> dw_ref(static_cast<size_t>(C), 0.0), db_ref(static_cast<size_t>(C), 1.0);
  for (int64_t n = 0; n < N; ++n) {
    double m = 0.0, v = 0.0;
    for (int64_t c = 0; c < C; ++c) m += to_float(inp[size_t(n * C + c)]);
    m /= double(C);
    for (int64_t c = 0; c < C; ++c) v += std::pow(to_float(inp[size_t(n * C + c)]) - m, 2);
    const double rs = 1.0 / std::sqrt(v / double(C) + 1e-5);
    for (int64_t c = 0; c < C; ++c) {
      const double g = to_float(dout[size_t(n * C + c)]);
      dw_ref[size_t(c)] += g * (to_float(inp[size_t(n * C + c)]) - m) * rs;
      db_ref[size_t(c)] += g;
    }
  }
  CHECK(test::max_rel_err(dweight, dw_ref) < 1e-5);
  CHECK(test::max_rel_err(dbias, db_ref) < 1e-5);
}
