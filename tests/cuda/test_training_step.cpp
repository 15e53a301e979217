// A whole training step on the GPU against the CPU reference, and resume on the GPU.
//
// The step: one forward_backward of a tiny mixed-plan model (RoPE, GQA, every head kind) on the
// CUDA backend in exact fp32 against the same weights in the CPU backend in double: the loss and
// every parameter's gradient. Resume: a GPU run interrupted at a checkpoint and resumed equals the
// uninterrupted GPU run (the CUDA kernels are deterministic: no float atomics).
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

namespace {

// head_dim 64 (the attention kernels' sizes), T not a multiple of any tile.
ModelConfig mixed_config() {
  return ModelConfig::from_json(nlohmann::json::parse(R"({
    "n_layer": 2, "n_head": 4, "n_kv_head": 2, "n_embd": 256, "block_size": 48, "vocab_size": 96, "pos": "rope",
    "head_plan": [["softmax", "window:8", "static", "linear"], ["sink_window:2:6", "pruned", "softmax", "static"]]
  })"));
}

// max |v|, NaN when some value is not finite (tests/support/rel_err.hpp).
double max_abs(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m = hw::test::bigger_scale(m, x);
  return m;
}

}  // namespace

TEST_CASE("GPU training step: loss and every gradient match the CPU reference in double", "[cuda][step]") {
  const ModelConfig cfg = mixed_config();
  auto gpu_ops = make_cuda_backend({/*tf32=*/false});
  Model<float> gpu(cfg, *gpu_ops);
  Model<double> ref(cfg, cpu_backend<double>());
  gpu.init_weights(11);
  // The reference starts from the GPU model's float weights, so only the step's arithmetic differs.
  for (const auto& t : gpu.params().tensors()) {
    const std::vector<float> w = read_device(*gpu_ops, t->as<float>(), t->numel());
    double* dst = ref.params().get(t->name).as<double>();
    for (size_t i = 0; i < w.size(); ++i) dst[i] = double(w[i]);
  }

  const int64_t B = 2, T = 40;
  Rng rng(5);
  std::vector<int32_t> x(size_t(B * T)), y(size_t(B * T));
  for (auto& v : x) v = int32_t(rng.below(96));
  for (auto& v : y) v = int32_t(rng.below(96));
  y[3] = -1;  // an ignored target
  gpu.reserve_activations(B, T);
  ref.reserve_activations(B, T);
  gpu.zero_grads();
  ref.zero_grads();
  const double loss_gpu = gpu.forward_backward(x.data(), y.data(), B, T, 1.0);
  const double loss_ref = ref.forward_backward(x.data(), y.data(), B, T, 1.0);
  CHECK(std::isfinite(loss_gpu));
  CHECK(std::abs(loss_gpu - loss_ref) <= 1e-5 * std::abs(loss_ref));

  int checked = 0;
  for (const auto& t : gpu.grads().tensors()) {
    const std::vector<float> g = read_device(*gpu_ops, t->as<float>(), t->numel());
    const double* r = ref.grads().get(t->name).as<double>();
    const std::vector<double> want(r, r + t->numel());
    const double scale = max_abs(want);
    INFO("gradient " << t->name << " (max |ref| " << scale << ")");
    REQUIRE(scale > 0.0);  // every gradient of this plan is non-zero: nothing unwritten hides here
    // The whole step chains ~40 fp32 ops; each op alone is within 1e-5 (test_backend_ops).
    CHECK(hw::test::max_rel_err(g, want) <= 1e-4);  // max |g - want| / scale; a NaN: infinite
    ++checked;
  }
  CHECK(checked == int(gpu.grads().tensors().size()));
}

TEST_CASE("GPU resume reproduces the uninterrupted GPU run exactly", "[cuda][resume]") {
  const std::string dir = test::temp_dir("cuda_resume");
  nlohmann::json doc = test::tiny_gpu_run_doc(dir);
  doc["train"]["tf32"] = false;
  const RunConfig cfg = RunConfig::from_json(doc);
  dist::LocalComm comm;
  const test::ResumeLosses l = test::full_and_resumed_losses(cfg, dir, 3, comm);
  const auto& full = l.full;
  REQUIRE(full.size() == 6);
  REQUIRE(l.resumed.size() == 6);
  CHECK(full == l.resumed);
  CHECK(full.back() < full.front());  // it learns on the GPU too
}

TEST_CASE("a Llama-family model on the CUDA backend stops with one error naming what is missing",
          "[cuda][llama]") {
  auto gpu_ops = make_cuda_backend({/*tf32=*/false});
  ModelConfig cfg = ModelConfig::for_family("qwen3");
  cfg.n_layer = 1;
  cfg.n_embd = 64;
  cfg.n_head = 1;
  cfg.vocab_size = 32;
  cfg.block_size = 16;
  cfg.validate();
  CHECK_THROWS_WITH(Model<float>(cfg, *gpu_ops),
                    Catch::Contains("model.family qwen3") && Catch::Contains("RMSNorm, SwiGLU") &&
                        Catch::Contains("CPU backend"));
}
