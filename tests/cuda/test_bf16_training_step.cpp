// A whole mixed-precision (train.precision = "bf16") training step on the GPU against the CPU
// reference in double, and bf16 resume on the GPU. The bounds are the ones the CPU's own bf16
// emulation meets against the same reference (tests/model/test_mixed_precision.cpp), so a GPU
// that passes computes what the CPU reference of the bf16 contract computes, up to rounding.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "cuda_test_util.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/model/device_copy.hpp"
#include "headwise/model/model.hpp"
#include "headwise/train/trainer.hpp"
#include "train/train_test_util.hpp"

using namespace hw;

TEST_CASE("GPU bf16 step: loss and every gradient within bf16 rounding of the CPU double reference",
          "[cuda][step][bf16]") {
  const ModelConfig cfg = ModelConfig::from_json(nlohmann::json::parse(R"({
    "n_layer": 2, "n_head": 4, "n_kv_head": 2, "n_embd": 256, "block_size": 48, "vocab_size": 96, "pos": "rope",
    "head_plan": [["softmax", "window:8", "static", "linear"], ["sink_window:2:6", "pruned", "softmax", "static"]]
  })"));
  auto gpu_ops = make_cuda_backend({/*tf32=*/false});
  Model<float> gpu(cfg, *gpu_ops);
  Model<double> ref(cfg, cpu_backend<double>());
  gpu.init_weights(11);
  gpu.set_precision(Precision::Bf16);
  for (const auto& t : gpu.params().tensors()) {  // the reference starts from the fp32 master weights
    const std::vector<float> w = read_device(*gpu_ops, t->as<float>(), t->numel());
    double* dst = ref.params().get(t->name).as<double>();
    for (size_t i = 0; i < w.size(); ++i) dst[i] = double(w[i]);
  }
  const int64_t B = 2, T = 40;
  Rng rng(5);
  std::vector<int32_t> x(static_cast<size_t>(B * T)), y(static_cast<size_t>(B * T));
  for (auto& v : x) v = int32_t(rng.below(96));
  for (auto& v : y) v = int32_t(rng.below(96));
  y[3] = -1;
  gpu.zero_grads();
  ref.zero_grads();
  const double loss_gpu = gpu.forward_backward(x.data(), y.data(), B, T, 1.0);
  const double loss_ref = ref.forward_backward(x.data(), y.data(), B, T, 1.0);
  CHECK(std::isfinite(loss_gpu));
  CHECK(std::abs(loss_gpu - loss_ref) <= 1e-3 * std::abs(loss_ref));
  for (const auto& t : gpu.grads().tensors()) {
    REQUIRE(t->dtype == DType::F32);  // gradients stay fp32 under bf16
    const std::vector<float> g = read_device(*gpu_ops, t->as<float>(), t->numel());
    const double* r = ref.grads().get(t->name).as<double>();
    double scale = 0.0, err = 0.0;  // a NaN on either side: err infinite (tests/support/rel_err.hpp)
    for (size_t i = 0; i < g.size(); ++i) {
      scale = hw::test::bigger_scale(scale, r[i]);
      err = hw::test::worse(err, hw::test::abs_err(double(g[i]), r[i]));
    }
    INFO("gradient " << t->name << ": max |ref| " << scale << ", max error " << err);
    REQUIRE(scale > 0.0);
    // L of a linear head sums many cancelling terms (fp32 too is ~100x worse on it than elsewhere).
    const bool linear = t->name.find(".linear.") != std::string::npos;
    CHECK(err <= (linear ? 1e-1 : 2e-2) * scale);
  }
}

TEST_CASE("GPU bf16 resume reproduces the uninterrupted bf16 GPU run exactly", "[cuda][resume][bf16]") {
  const std::string dir = test::temp_dir("cuda_bf16_resume");
  nlohmann::json doc = test::tiny_gpu_run_doc(dir);
  doc["train"]["precision"] = "bf16";
  const RunConfig cfg = RunConfig::from_json(doc);
  dist::LocalComm comm;
  const test::ResumeLosses l = test::full_and_resumed_losses(cfg, dir, 3, comm);
  const auto& full = l.full;
  REQUIRE(full.size() == 6);
  REQUIRE(l.resumed.size() == 6);
  CHECK(full == l.resumed);
  CHECK(full.back() < full.front());
}
