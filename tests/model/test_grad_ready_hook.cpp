// The grad-ready hook and its byte ranges: backward reports layers L-1..0 then -1, each range
// holds exactly its tensors, the ranges tile the gradient block, and at each report the
// reported bytes already hold their final values while the layers below are still untouched.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cstring>
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/model.hpp"

using namespace hw;

namespace {

ModelConfig hook_config() {
  ModelConfig c;
  c.n_layer = 3;
  c.n_head = 2;
  c.n_embd = 16;
  c.vocab_size = 29;
  c.block_size = 8;
  c.head_plan = attn::HeadPlan::from_json(
      nlohmann::json::parse(R"([["softmax", "linear"], ["static", "softmax"], ["window:2", "softmax"]])"));
  return c;
}

using Range = Model<float>::ByteRange;

std::vector<unsigned char> bytes_of(const Arena& a) {
  const auto* p = static_cast<const unsigned char*>(a.base());
  return {p, p + a.bytes()};
}

bool range_equal(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b, Range r) {
  return std::equal(a.begin() + long(r.begin), a.begin() + long(r.end), b.begin() + long(r.begin));
}

bool range_zero(const std::vector<unsigned char>& a, Range r) {
  return std::all_of(a.begin() + long(r.begin), a.begin() + long(r.end), [](unsigned char c) { return c == 0; });
}

}  // namespace

TEST_CASE("grad-ready ranges hold exactly each layer's tensors and tile the gradient block", "[model][hook]") {
  Model<float> m(hook_config(), cpu_backend<float>());
  const Arena& g = m.grads();
  std::vector<Range> all;
  for (int l = -1; l < m.config().n_layer; ++l)
    for (const Range& r : m.grad_ready_ranges(l)) all.push_back(r);
  CHECK(m.grad_ready_ranges(-1).size() == 2);
  std::sort(all.begin(), all.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  REQUIRE(!all.empty());
  CHECK(all.front().begin == 0);
  CHECK(all.back().end == g.bytes());
  for (size_t i = 1; i < all.size(); ++i) CHECK(all[i].begin == all[i - 1].end);
  // Each tensor lies inside the range of its layer (-1: no "h." prefix).
  for (const auto& t : g.tensors()) {
    int layer = -1;
    if (t->name.rfind("h.", 0) == 0) layer = std::stoi(t->name.substr(2));
    const size_t b = g.offset_of(*t), e = b + t->nbytes();
    bool inside = false;
    for (const Range& r : m.grad_ready_ranges(layer)) inside = inside || (r.begin <= b && e <= r.end);
    INFO(t->name);
    CHECK(inside);
  }
  CHECK_THROWS_AS(m.grad_ready_ranges(3), Error);
  CHECK_THROWS_AS(m.grad_ready_ranges(-2), Error);
}

TEST_CASE("backward reports each layer once its gradients are final, last layer first", "[model][hook]") {
  const ModelConfig cfg = hook_config();
  Model<float> m(cfg, cpu_backend<float>());
  m.init_weights(2);
  const int64_t B = 2, T = 8;
  Rng rng(3);
  std::vector<int32_t> x(size_t(B * T)), y(size_t(B * T));
  for (auto& v : x) v = int32_t(rng.below(29));
  for (auto& v : y) v = int32_t(rng.below(29));
  std::vector<int> order;
  std::vector<std::vector<unsigned char>> at_report;
  m.set_grad_ready_hook([&](int layer) {
    order.push_back(layer);
    at_report.push_back(bytes_of(m.grads()));
  });
  m.zero_grads();
  m.forward_backward(x.data(), y.data(), B, T, 1.0);
  const std::vector<unsigned char> final_grads = bytes_of(m.grads());
  CHECK(order == std::vector<int>{2, 1, 0, -1});
  for (size_t k = 0; k < order.size(); ++k) {
    const int l = order[k];
    INFO("report " << k << " (layer " << l << ")");
    for (const Range& r : m.grad_ready_ranges(l)) {
      CHECK(range_equal(at_report[k], final_grads, r));
      CHECK_FALSE(range_zero(final_grads, r));  // the comparison is not vacuous
    }
    for (int below = 0; below < l; ++below)  // layers not reported yet have not been touched
      CHECK(range_zero(at_report[k], m.grad_ready_ranges(below)[0]));
  }
  // Removing the hook: backward runs without reports.
  m.set_grad_ready_hook({});
  order.clear();
  m.forward_backward(x.data(), y.data(), B, T, 1.0);
  CHECK(order.empty());
}
