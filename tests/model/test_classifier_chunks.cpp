// The row-chunked classifier (Model::set_classifier_chunk_rows): loss, every gradient and the
// logits equal the whole-batch classifier up to float summation order, and only one chunk of
// logits is held.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/gpt.hpp"

using namespace hw;

namespace {

// RoPE, GQA and every head kind, so the chunked head runs after all of them.
ModelConfig mixed_config() {
  ModelConfig c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 32;
  c.vocab_size = 37;
  c.block_size = 12;
  c.pos = "rope";
  c.head_plan = attn::HeadPlan::from_json(nlohmann::json::parse(
      R"([["softmax", "window:3", "sink_window:1:2", "static"], ["linear", "pruned", "softmax", "window:5"]])"));
  return c;
}

struct Batch {
  std::vector<int32_t> x, y;
};

// Some ignored targets, including a whole row of one sequence, so chunks differ in what they count.
Batch make_batch(int64_t B, int64_t T, int vocab) {
  Rng rng(5);
  Batch b{std::vector<int32_t>(size_t(B * T)), std::vector<int32_t>(size_t(B * T))};
  for (auto& v : b.x) v = int32_t(rng.below(uint64_t(vocab)));
  for (auto& v : b.y) v = int32_t(rng.below(uint64_t(vocab)));
  for (int64_t t = 0; t < T; t += 3) b.y[size_t(t)] = -1;
  return b;
}

// Largest |a - b| over a tensor, relative to the largest |a|.
template <class F>
double max_rel_diff(const Tensor& a, const Tensor& b) {
  double diff = 0.0, scale = 0.0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, std::abs(double(a.as<F>()[i]) - double(b.as<F>()[i])));
    scale = std::max(scale, std::abs(double(a.as<F>()[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

template <class F>
void check_chunked_equals_whole(int64_t chunk, double tol) {
  const ModelConfig cfg = mixed_config();
  const int64_t B = 2, T = 12, N = B * T;
  Model<F> whole(cfg, cpu_backend<F>()), chunked(cfg, cpu_backend<F>());
  whole.init_weights(11);
  chunked.init_weights(11);
  chunked.set_classifier_chunk_rows(chunk);
  const Batch b = make_batch(B, T, cfg.vocab_size);
  // Two micro-steps: the chunked LM-head gradient also accumulates across calls.
  whole.zero_grads();
  chunked.zero_grads();
  double lw = 0.0, lc = 0.0;
  for (double scale : {0.5, 0.25}) {
    lw = whole.forward_backward(b.x.data(), b.y.data(), B, T, scale);
    lc = chunked.forward_backward(b.x.data(), b.y.data(), B, T, scale);
    CHECK(lc == Approx(lw).epsilon(tol));
  }
  int checked = 0;
  for (const auto& t : whole.grads().tensors()) {
    INFO(t->name << " chunk " << chunk);
    CHECK(max_rel_diff<F>(*t, chunked.grads().get(t->name)) <= tol);
    ++checked;
  }
  CHECK(checked > 20);
  // Only `chunk` rows of logits exist; the whole model holds all N.
  CHECK(chunked.activations().get("logits").shape == std::vector<int64_t>{std::min(chunk, N), cfg.vocab_size});
  CHECK(whole.activations().get("logits").shape == std::vector<int64_t>{N, cfg.vocab_size});
  // Evaluation loss and the logits read back (computed chunk by chunk from ln_f's output).
  const double eval_w = whole.forward(b.x.data(), b.y.data(), B, T);
  CHECK(chunked.forward(b.x.data(), b.y.data(), B, T) == Approx(eval_w).epsilon(tol));
  whole.forward(b.x.data(), nullptr, B, T);
  chunked.forward(b.x.data(), nullptr, B, T);
  std::vector<F> logits_w, logits_c;
  whole.read_logits(logits_w);
  chunked.read_logits(logits_c);
  REQUIRE(logits_c.size() == size_t(N * cfg.vocab_size));
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < logits_w.size(); ++i) {
    diff = std::max(diff, std::abs(double(logits_w[i]) - double(logits_c[i])));
    scale = std::max(scale, std::abs(double(logits_w[i])));
  }
  CHECK(diff <= tol * scale);
}

}  // namespace

TEST_CASE("chunked classifier equals the whole-batch classifier in float", "[model][chunks]") {
  const int64_t chunk = GENERATE(1, 5, 23, 24, 100);
  check_chunked_equals_whole<float>(chunk, 1e-6);
}

TEST_CASE("chunked classifier equals the whole-batch classifier in double", "[model][chunks]") {
  const int64_t chunk = GENERATE(1, 7);
  check_chunked_equals_whole<double>(chunk, 1e-13);
}

TEST_CASE("read_logits after forward_backward recomputes the logits the gradient overwrote", "[model][chunks]") {
  const ModelConfig cfg = mixed_config();
  const int64_t B = 2, T = 12;
  Model<double> m(cfg, cpu_backend<double>());
  m.init_weights(4);
  const Batch b = make_batch(B, T, cfg.vocab_size);
  m.forward(b.x.data(), nullptr, B, T);
  std::vector<double> before, after;
  m.read_logits(before);
  m.zero_grads();
  m.forward_backward(b.x.data(), b.y.data(), B, T, 1.0);
  m.read_logits(after);
  CHECK(after == before);
}

TEST_CASE("a negative chunk size is an error naming it", "[model][chunks]") {
  Model<float> m(mixed_config(), cpu_backend<float>());
  CHECK_THROWS_WITH(m.set_classifier_chunk_rows(-1), Catch::Contains("chunk rows"));
}
