// Sampling: greedy, temperature, top-k, top-p and seeds; generation end to end against the full
// forward (greedy = argmax of the training forward's logits at every generated position).
#include <catch2/catch.hpp>

#include <cmath>
#include <set>

#include "headwise/core/error.hpp"
#include "headwise/infer/generate.hpp"
#include "infer/infer_fixture.hpp"

using namespace hw;
using namespace hw::test;

namespace {

std::vector<int> draw_counts(const std::vector<float>& logits, infer::SamplingOptions o, int draws) {
  infer::Sampler s(o, int(logits.size()));
  std::vector<int> n(logits.size(), 0);
  for (int i = 0; i < draws; ++i) ++n[size_t(s.next(logits.data()))];
  return n;
}

}  // namespace

TEST_CASE("sampling: greedy, top-k, top-p and temperature follow their definitions", "[infer]") {
  // probabilities 1/6, 2/6, 3/6 at temperature 1; index 3 is far below
  const std::vector<float> logits = {0.f, std::log(2.f), std::log(3.f), -30.f};
  infer::SamplingOptions o;
  o.temperature = 0.0;
  CHECK(draw_counts(logits, o, 10) == std::vector<int>{0, 0, 10, 0});
  CHECK(infer::argmax(std::vector<float>{1.f, 3.f, 3.f}.data(), 3) == 1);  // first on ties

  o = {};
  o.seed = 4;
  const int N = 60000;
  auto n = draw_counts(logits, o, N);
  CHECK(std::fabs(n[0] / double(N) - 1.0 / 6) < 0.01);
  CHECK(std::fabs(n[1] / double(N) - 2.0 / 6) < 0.01);
  CHECK(std::fabs(n[2] / double(N) - 3.0 / 6) < 0.01);

  o.top_k = 2;  // renormalised over {2, 1}: 3/5, 2/5
  n = draw_counts(logits, o, N);
  CHECK(n[0] == 0);
  CHECK(n[3] == 0);
  CHECK(std::fabs(n[2] / double(N) - 0.6) < 0.01);

  o.top_k = 0;
  o.top_p = 0.6;  // 1/2 < 0.6 <= 1/2 + 1/3: the two most likely, renormalised
  n = draw_counts(logits, o, N);
  CHECK(n[0] == 0);
  CHECK(std::fabs(n[2] / double(N) - 0.6) < 0.01);
  o.top_p = 0.4;  // the most likely alone
  CHECK(draw_counts(logits, o, 100) == std::vector<int>{0, 0, 100, 0});

  o.top_p = 1.0;
  o.temperature = 0.5;  // squares the odds: 1, 4, 9 over 14
  n = draw_counts(logits, o, N);
  CHECK(std::fabs(n[2] / double(N) - 9.0 / 14) < 0.01);
  CHECK(std::fabs(n[0] / double(N) - 1.0 / 14) < 0.01);

  o.top_k = 1;  // top-1 is greedy whatever the temperature
  o.temperature = 5.0;
  CHECK(draw_counts(logits, o, 50) == std::vector<int>{0, 0, 50, 0});
}

TEST_CASE("sampling: bad options name the option", "[infer]") {
  infer::SamplingOptions o;
  o.temperature = -1;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("--temperature"));
  o = {};
  o.top_k = -2;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("--top-k"));
  o = {};
  o.top_p = 0.0;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("--top-p"));
  o.top_p = 1.5;
  CHECK_THROWS_WITH(o.validate(), Catch::Contains("--top-p"));
}

TEST_CASE("generate: a seed reproduces the tokens, another seed does not, greedy is the full forward's argmax",
          "[infer]") {
  for (const char* plan : {R"([["softmax","window:3","sink_window:2:5","static"],["linear","pruned","window:6","sink_window:1:3"]])",
                           R"([["softmax","softmax","softmax","softmax"],["softmax","softmax","softmax","softmax"]])"}) {
    const InferCase c{"gen", 2, "rope", plan};
    const ModelConfig cfg = infer_config(c);
    auto model = infer_model(cfg, 6);  // a seed whose greedy continuations are not one repeated token
    const auto prompt = random_tokens(9, cfg.vocab_size, 8);
    infer::CachedDecoder dec(*model, cfg.block_size, 4);
    infer::SamplingOptions o;
    o.temperature = 1.0;
    o.seed = 21;
    infer::Sampler s1(o, cfg.vocab_size), s2(o, cfg.vocab_size);
    std::vector<int32_t> streamed;
    const auto a = infer::generate(dec, s1, prompt, 31, [&](int32_t t) { streamed.push_back(t); });
    const auto b = infer::generate(dec, s2, prompt, 31);
    CHECK(a.size() == 31);
    CHECK(a == b);
    CHECK(streamed == a);
    o.seed = 22;
    infer::Sampler s3(o, cfg.vocab_size);
    CHECK(infer::generate(dec, s3, prompt, 31) != a);

    o.temperature = 0.0;
    infer::Sampler greedy(o, cfg.vocab_size);
    const auto g = infer::generate(dec, greedy, prompt, 31);
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), g.begin(), g.end() - 1);
    const auto ref = full_forward_logits(*model, seq);
    int distinct = 0;
    std::set<int32_t> seen(g.begin(), g.end());
    distinct = int(seen.size());
    for (size_t k = 0; k < g.size(); ++k) {
      const int64_t row = int64_t(prompt.size()) - 1 + int64_t(k);
      INFO("generated token " << k);
      CHECK(g[k] == infer::argmax(ref.data() + row * cfg.vocab_size, cfg.vocab_size));
    }
    INFO(plan);
    CHECK(distinct > 1);  // not a degenerate constant sequence
    CHECK_THROWS_WITH(infer::generate(dec, greedy, prompt, cfg.block_size), Catch::Contains("positions"));
  }
}
