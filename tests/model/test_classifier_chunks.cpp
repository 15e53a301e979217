// The row-chunked classifier (Model::set_classifier_chunk_rows): loss, every gradient and the
// logits are as accurate as the whole-batch classifier's against a double model (in double:
// equal to double rounding), and only one chunk of logits is held.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/model.hpp"
#include "support/rel_err.hpp"

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

// Largest |a - b| over a tensor, relative to the largest |b| (NaN-proof: support/rel_err.hpp).
template <class A, class B>
double tensor_err(const Tensor& a, const Tensor& b) {
  return test::max_rel_err(a.as<A>(), b.as<B>(), a.numel());
}

// The models of one comparison after the same two micro-steps (the chunked LM-head gradient
// also accumulates across calls): losses of both calls, eval loss and logits.
template <class F>
struct Ran {
  std::unique_ptr<Model<F>> model;
  std::vector<double> losses;
  double eval = 0.0;
  std::vector<F> logits;
};

template <class F>
Ran<F> run(const ModelConfig& cfg, int64_t chunk, const Batch& b, int64_t B, int64_t T,
           const Model<float>* weights_from = nullptr) {
  Ran<F> r;
  r.model = std::make_unique<Model<F>>(cfg, cpu_backend<F>());
  r.model->init_weights(11);
  if (weights_from)  // exactly the float model's weights, widened
    for (const auto& t : weights_from->params().tensors())
      for (int64_t i = 0; i < t->numel(); ++i) r.model->params().get(t->name).template as<F>()[i] = F(t->as<float>()[i]);
  r.model->set_classifier_chunk_rows(chunk);
  r.model->zero_grads();
  for (double scale : {0.5, 0.25}) r.losses.push_back(r.model->forward_backward(b.x.data(), b.y.data(), B, T, scale));
  r.eval = r.model->forward(b.x.data(), b.y.data(), B, T);
  r.model->forward(b.x.data(), nullptr, B, T);
  r.model->read_logits(r.logits);
  return r;
}

// Chunking only changes the classifier's roundings (which rows a GEMM call holds, and the order
// the tied wte gradient is summed in), so it must not make any result less accurate than
// rounding makes the whole-batch one. Why not "chunked == whole within a fixed number": the two
// differ by rounding propagated through backward, which some tensors amplify (the linear heads'
// L gradient sums many cancelling terms: 2.5e-5 relative in float on AVX2 OpenBLAS, 1e-7 on
// AVX-512), so any fixed bound passes on one machine and fails on another.
//
// So every run is measured against a double model on the float model's own weights:
// - float: per tensor, err(chunked) <= 4 err(whole) + 8 u_f (u_f = 2^-24, relative to the
//   tensor's largest value). err(whole) is this tensor's own rounding error on this machine;
//   the maxima of two roundings of the same computation were up to 2.3x apart over OpenBLAS's
//   Zen, Haswell, Sandybridge and Prescott kernels, and a chunking bug (a row, a target or a
//   chunk's gradient lost) shows as an error of O(1), far above 4x the rounding.
// - double: the same tensor's amplification of rounding, err(whole float) / u_f, bounds the
//   chunked-vs-whole difference in double: <= 4 (err / u_f) u_d + 8 u_d, u_d = 2^-53.
void check_chunks(int64_t chunk) {
  const ModelConfig cfg = mixed_config();
  const int64_t B = 2, T = 12, N = B * T;
  const Batch b = make_batch(B, T, cfg.vocab_size);
  const Ran<float> whole = run<float>(cfg, 0, b, B, T), chunked = run<float>(cfg, chunk, b, B, T);
  const Ran<double> exact = run<double>(cfg, 0, b, B, T, whole.model.get());
  const Ran<double> exact_chunked = run<double>(cfg, chunk, b, B, T, whole.model.get());
  const double uf = std::ldexp(1.0, -24), ud = std::ldexp(1.0, -53);
  auto within = [&](double err_chunked, double err_whole) { return err_chunked <= 4 * err_whole + 8 * uf; };
  auto double_bound = [&](double err_whole_float) { return 4 * (err_whole_float / uf) * ud + 8 * ud; };
  auto rel = [](double got, double ref) { return test::ratio(test::abs_err(got, ref), std::fabs(ref)); };
  for (size_t k = 0; k < whole.losses.size(); ++k) {
    const double ew = rel(whole.losses[k], exact.losses[k]);
    CHECK(within(rel(chunked.losses[k], exact.losses[k]), ew));
    CHECK(rel(exact_chunked.losses[k], exact.losses[k]) <= double_bound(ew));
  }
  CHECK(within(rel(chunked.eval, exact.eval), rel(whole.eval, exact.eval)));
  CHECK(rel(exact_chunked.eval, exact.eval) <= double_bound(rel(whole.eval, exact.eval)));
  int checked = 0;
  for (const auto& t : whole.model->grads().tensors()) {
    const Tensor& d = exact.model->grads().get(t->name);
    const double ew = tensor_err<float, double>(*t, d);
    const double ec = tensor_err<float, double>(chunked.model->grads().get(t->name), d);
    const double edc = tensor_err<double, double>(exact_chunked.model->grads().get(t->name), d);
    INFO(t->name << " chunk " << chunk << ": float chunked " << ec << ", float whole " << ew
                 << ", double chunked " << edc << " relative to double whole");
    CHECK(std::isfinite(ew));
    CHECK(within(ec, ew));
    CHECK(edc <= double_bound(ew));
    ++checked;
  }
  CHECK(checked > 20);
  const double logits_w = test::max_rel_err(whole.logits, exact.logits);
  CHECK(within(test::max_rel_err(chunked.logits, exact.logits), logits_w));
  CHECK(test::max_rel_err(exact_chunked.logits, exact.logits) <= double_bound(logits_w));
  // Only `chunk` rows of logits exist; the whole model holds all N.
  for (auto* m : {&chunked.model->activations(), &exact_chunked.model->activations()})
    CHECK(m->get("logits").shape == std::vector<int64_t>{std::min(chunk, N), cfg.vocab_size});
  CHECK(whole.model->activations().get("logits").shape == std::vector<int64_t>{N, cfg.vocab_size});
  REQUIRE(chunked.logits.size() == size_t(N * cfg.vocab_size));
}

}  // namespace

TEST_CASE("chunked classifier is as accurate as the whole-batch classifier, in float and in double",
          "[model][chunks]") {
  check_chunks(GENERATE(1, 5, 7, 23, 24, 100));
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
