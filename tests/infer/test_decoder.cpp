// Prefill + cached decode against the training forward over the whole sequence, for every head
// kind and mixed plans, MHA and GQA, learned and RoPE positions; sequences long enough that every
// ring buffer wraps several times and prefill chunks that straddle them.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "headwise/core/error.hpp"
#include "headwise/infer/cached_decoder.hpp"
#include "infer/infer_fixture.hpp"
#include "support/rel_err.hpp"

using namespace hw;
using namespace hw::test;

namespace {

const char* kPlans[][2] = {
    {"softmax", R"([["softmax","softmax","softmax","softmax"],["softmax","softmax","softmax","softmax"]])"},
    {"window", R"([["window:3","window:3","window:3","window:3"],["window:5","window:5","window:5","window:5"]])"},
    {"sink_window", R"([["sink_window:2:4","sink_window:2:4","sink_window:2:4","sink_window:2:4"],)"
                    R"(["sink_window:1:3","sink_window:1:3","sink_window:1:3","sink_window:1:3"]])"},
    {"static", R"([["static","static","static","static"],["static","static","static","static"]])"},
    {"linear", R"([["linear","linear","linear","linear"],["linear","linear","linear","linear"]])"},
    {"pruned", R"([["pruned","pruned","pruned","pruned"],["pruned","softmax","pruned","pruned"]])"},
    // mixed: with GQA (2 KV heads) groups pair softmax+window (All), sink_window+static (All, K
    // for the sink_window head only), linear+pruned (state only), window:6+sink_window:1:3 (a
    // ring of S=1, W=6 in which the sink_window head masks by position)
    {"mixed", R"([["softmax","window:3","sink_window:2:5","static"],["linear","pruned","window:6","sink_window:1:3"]])"},
    {"mixed2", R"([["window:7","sink_window:3:2","static","linear"],["sink_window:2:4","softmax","pruned","window:5"]])"},
};

// Worst relative error of prefill(P tokens, chunk) + step-by-step decode of the rest against the
// full forward, over every position's logits.
double decode_error(const InferCase& c, int64_t T, int64_t P, int64_t chunk, int64_t split_cols = 512) {
  const ModelConfig cfg = infer_config(c);
  auto model = infer_model(cfg);
  const auto tokens = random_tokens(T, cfg.vocab_size, 11);
  const std::vector<float> ref = full_forward_logits(*model, tokens);
  infer::CachedDecoder dec(*model, cfg.block_size, chunk, split_cols);
  const int64_t V = cfg.vocab_size;
  std::vector<float> got(size_t(T * V));
  const float* last = dec.prefill(tokens.data(), P, got.data());
  REQUIRE(std::equal(last, last + V, got.data() + (P - 1) * V));
  for (int64_t t = P; t < T; ++t) {
    const float* lg = dec.step(tokens[size_t(t)]);
    std::copy(lg, lg + V, got.data() + t * V);
  }
  REQUIRE(dec.position() == T);
  return max_rel_err(got, ref);
}

}  // namespace

TEST_CASE("decode: prefill + cached decode equals the full forward for every kind, MHA and GQA, learned and rope",
          "[infer]") {
  for (const auto& p : kPlans)
    for (int kv : {4, 2})
      for (const char* pos : {"learned", "rope"}) {
        const InferCase c{p[0], kv, pos, p[1]};
        for (auto [P, chunk] : {std::pair<int64_t, int64_t>{13, 5}, {1, 64}, {40, 16}}) {
          const double err = decode_error(c, 40, P, chunk);
          INFO(c.name << " kv=" << kv << " " << pos << " prefill " << P << " chunk " << chunk << ": " << err);
          CHECK(err <= 1e-5);
        }
      }
}

// Issue 53: every kind on each Llama-family shape (RMSNorm, SwiGLU, GQA, Llama 3 RoPE scaling,
// Qwen2's q/k/v biases, Qwen3's q/k norm and wider heads), in logits.
TEST_CASE("decode: every kind on Llama, Qwen2 and Qwen3 shapes equals the full forward in logits", "[infer][llama]") {
  for (const char* family : {"llama", "qwen2", "qwen3"})
    for (const auto& p : kPlans)
      for (int kv : {4, 2}) {
        const InferCase c{p[0], kv, "rope", p[1], family};
        for (auto [P, chunk] : {std::pair<int64_t, int64_t>{13, 5}, {1, 64}}) {
          const double err = decode_error(c, 40, P, chunk);
          INFO(family << " " << c.name << " kv=" << kv << " prefill " << P << " chunk " << chunk << ": " << err);
          CHECK(err <= 1e-5);
        }
      }
}

TEST_CASE("decode: steps split into parts of a few keys (merged by log-sum-exp) equal the full forward", "[infer]") {
  // Parts of 3 and 7 keys: many parts per head, parts that straddle the sink and the ring, parts
  // whose keys are all masked (a ring slot outside the window), the own key alone in a part.
  for (const auto& p : kPlans)
    for (int kv : {4, 2})
      for (const char* pos : {"learned", "rope"}) {
        const InferCase c{p[0], kv, pos, p[1]};
        for (int64_t split : {1, 3, 7}) {
          const double err = decode_error(c, 40, 1, 64, split);
          INFO(c.name << " kv=" << kv << " " << pos << " split " << split << ": " << err);
          CHECK(err <= 1e-5);
        }
      }
}

TEST_CASE("decode: a wrong cache would be caught (the comparison can fail)", "[infer]") {
  // The same decode with a model whose weights differ slightly from the reference's must fail the
  // bound: guards against a comparison that passes whatever the decoder computes.
  const InferCase c{"sink_window", 2, "rope", kPlans[2][1]};
  const ModelConfig cfg = infer_config(c);
  auto model = infer_model(cfg);
  auto other = infer_model(cfg);
  other->params().get("h.1.attn.c_attn.weight").f32()[3] += 1e-2f;
  const auto tokens = random_tokens(40, cfg.vocab_size, 11);
  const std::vector<float> ref = full_forward_logits(*model, tokens);
  infer::CachedDecoder dec(*other, cfg.block_size, 5);
  std::vector<float> got(ref.size());
  dec.prefill(tokens.data(), 40, got.data());
  CHECK(max_rel_err(got, ref) > 1e-5);
}

TEST_CASE("decode: ring buffers hold exactly the first S and the last W keys, at their original positions",
          "[infer]") {
  for (const char* pos : {"learned", "rope"}) {
    // layer 0: sink_window:2:4 (S=2, W=4), layer 1: window:3 (S=0, W=3); MHA
    const InferCase c{"ring", 4, pos,
                      R"([["sink_window:2:4","sink_window:2:4","sink_window:2:4","sink_window:2:4"],)"
                      R"(["window:3","window:3","window:3","window:3"]])"};
    const ModelConfig cfg = infer_config(c);
    auto model = infer_model(cfg);
    const auto tokens = random_tokens(23, cfg.vocab_size, 3);
    infer::CachedDecoder dec(*model, cfg.block_size, 4);
    dec.prefill(tokens.data(), 9);
    for (int64_t t = 9; t < 23; ++t) dec.step(tokens[size_t(t)]);
    model->forward(tokens.data(), nullptr, 1, 23);
    const auto& cache = dec.cache();
    for (int l = 0; l < 2; ++l) {
      std::vector<float> qkv;
      model->read_layer_qkv(l, qkv);
      const auto& lay = model->layouts()[size_t(l)];
      const std::set<int64_t> want = l == 0 ? std::set<int64_t>{0, 1, 19, 20, 21, 22} : std::set<int64_t>{20, 21, 22};
      for (int g = 0; g < 4; ++g) {
        const auto held = cache.held_positions(l, g);
        CHECK(held.size() == want.size());
        CHECK(std::set<int64_t>(held.begin(), held.end()) == want);
        CHECK(cache.policy(l, g).slots == int64_t(want.size()));
        // The rows are the model's K and V at those positions (K after RoPE).
        for (size_t s = 0; s < held.size(); ++s) {
          const float* k_ref = qkv.data() + held[s] * lay.qkv_width() + lay.k_col(g);
          const float* v_ref = qkv.data() + held[s] * lay.qkv_width() + lay.v_col(g);
          std::vector<float> kr(k_ref, k_ref + 8), vr(v_ref, v_ref + 8);
          std::vector<float> kg(cache.k_row(l, g, int64_t(s)), cache.k_row(l, g, int64_t(s)) + 8);
          std::vector<float> vg(cache.v_row(l, g, int64_t(s)), cache.v_row(l, g, int64_t(s)) + 8);
          INFO(pos << " layer " << l << " kv " << g << " slot " << s << " position " << held[s]);
          CHECK(max_rel_err(kg, kr) <= 1e-5);
          CHECK(max_rel_err(vg, vr) <= 1e-5);
        }
      }
    }
  }
}

TEST_CASE("decode: KV bytes follow the formula, extended to static, linear and pruned heads", "[infer]") {
  const int D = 8;
  const int64_t T = 40, bpv = 4;
  SECTION("softmax + sink_window (the issue's formula), GQA") {
    // per layer one full KV head and one streaming KV head (S = 2, W = 4)
    const InferCase c{"aoh", 2, "rope",
                      R"([["softmax","softmax","sink_window:2:4","sink_window:2:4"],)"
                      R"(["sink_window:2:4","sink_window:2:4","softmax","softmax"]])"};
    auto model = infer_model(infer_config(c));
    infer::CachedDecoder dec(*model, T);
    const int64_t formula = 2 * (2 * D * bpv * (1 * T + 1 * (2 + 4)));  // sum over 2 layers
    CHECK(int64_t(dec.kv_bytes()) == formula);
    CHECK(formula == 5888);
    infer::CachedDecoder small(*model, 20);  // a smaller maximum context shrinks only the full heads
    CHECK(int64_t(small.kv_bytes()) == 2 * (2 * D * bpv * (20 + 6)));
  }
  SECTION("every kind, MHA") {
    // static: V only, T rows; pruned: nothing; linear: (1 + D + D(D+1)/2) x (D + 1) state;
    // window:3: K and V, 3 rows; sink_window:30:20 (S + W >= T): K and V for all T rows.
    const InferCase c{"kinds", 4, "learned",
                      R"([["static","pruned","linear","window:3"],["sink_window:30:20","softmax","pruned","pruned"]])"};
    auto model = infer_model(infer_config(c));
    infer::CachedDecoder dec(*model, T);
    const int64_t Fw = 1 + D + D * (D + 1) / 2;
    CHECK(Fw == 45);
    const int64_t want = bpv * (D * T + 0 + Fw * (D + 1) + 2 * D * 3) + bpv * (2 * D * T + 2 * D * T + 0 + 0);
    CHECK(int64_t(dec.kv_bytes()) == want);
    CHECK(dec.cache().policy(0, 0).has_k == false);
    CHECK(dec.cache().policy(1, 0).rows == attn::KvRows::All);
  }
  SECTION("GQA: a KV head keeps what its most demanding query head needs") {
    const InferCase c{"gqa", 2, "learned",
                      R"([["window:3","sink_window:2:5","static","linear"],["linear","pruned","pruned","pruned"]])"};
    auto model = infer_model(infer_config(c));
    infer::CachedDecoder dec(*model, T);
    const auto& p00 = dec.cache().policy(0, 0);
    CHECK(p00.rows == attn::KvRows::SinkRing);
    CHECK(p00.sink == 2);
    CHECK(p00.window == 5);
    const auto& p01 = dec.cache().policy(0, 1);  // static + linear: V of every position, and the state
    CHECK((p01.rows == attn::KvRows::All && !p01.has_k && p01.has_v && p01.linear_state));
    const auto& p10 = dec.cache().policy(1, 0);  // linear + pruned: the state only
    CHECK((p10.rows == attn::KvRows::None && !p10.has_k && !p10.has_v && p10.linear_state));
    const auto& p11 = dec.cache().policy(1, 1);  // pruned + pruned: nothing
    CHECK((p11.rows == attn::KvRows::None && !p11.linear_state && p11.slots == 0));
    const int64_t Fw = 45;
    CHECK(int64_t(dec.kv_bytes()) == bpv * (2 * D * 7 + D * T + Fw * (D + 1) + Fw * (D + 1)));
  }
}

TEST_CASE("decode: bad use is one clear error", "[infer]") {
  const InferCase c{"softmax", 4, "learned", kPlans[0][1]};
  const ModelConfig cfg = infer_config(c);
  auto model = infer_model(cfg);
  CHECK_THROWS_WITH(infer::CachedDecoder(*model, cfg.block_size + 1), Catch::Contains("block_size"));
  infer::CachedDecoder dec(*model, 8);
  const auto tokens = random_tokens(8, cfg.vocab_size, 1);
  dec.prefill(tokens.data(), 8);
  CHECK_THROWS_WITH(dec.step(1), Catch::Contains("exceed the cache's context of 8"));
  dec.reset();
  CHECK_THROWS_WITH(dec.step(cfg.vocab_size), Catch::Contains("outside the vocabulary"));
  CHECK(dec.position() == 0);
}

TEST_CASE("decode: more OpenMP threads after construction still use only the scratch that exists", "[infer]") {
  const InferCase c{"mixed", 2, "rope", kPlans[6][1]};
  const ModelConfig cfg = infer_config(c);
  auto model = infer_model(cfg);
  const auto tokens = random_tokens(40, cfg.vocab_size, 4);
  const std::vector<float> ref = full_forward_logits(*model, tokens);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  infer::CachedDecoder dec(*model, cfg.block_size, 6);
  omp_set_num_threads(4);
  std::vector<float> got(ref.size());
  dec.prefill(tokens.data(), 40, got.data());
  omp_set_num_threads(saved);
  CHECK(max_rel_err(got, ref) <= 1e-5);
}

TEST_CASE("decode: a model without biases (the SAF recipe) equals the full forward too", "[infer]") {
  const InferCase c{"mixed", 2, "learned", kPlans[7][1]};
  ModelConfig cfg = infer_config(c);
  cfg.bias = false;
  auto model = infer_model(cfg);
  const auto tokens = random_tokens(40, cfg.vocab_size, 6);
  const std::vector<float> ref = full_forward_logits(*model, tokens);
  infer::CachedDecoder dec(*model, cfg.block_size, 9);
  std::vector<float> got(ref.size());
  dec.prefill(tokens.data(), 17, got.data());
  for (int64_t t = 17; t < 40; ++t) {
    const float* lg = dec.step(tokens[size_t(t)]);
    std::copy(lg, lg + cfg.vocab_size, got.data() + t * cfg.vocab_size);
  }
  CHECK(max_rel_err(got, ref) <= 1e-5);
}

// Issue 35: the decoder indexes L with the groups itself (linear_query_side), so it checks them
// on its own: a groups buffer corrupted after the model checked it is refused by name.
TEST_CASE("decode: groups outside 1..G in the model's buffer are refused, not indexed", "[infer][hostile]") {
  const InferCase c{"linear", 4, "learned", R"([["linear","softmax","softmax","softmax"],["softmax","softmax","softmax","softmax"]])"};
  auto model = infer_model(infer_config(c));
  CHECK_NOTHROW(infer::CachedDecoder(*model, 16));
  int32_t* groups = model->buffers().get("h.0.attn.linear.0.groups").i32();
  groups[5] = 3;  // G is 2
  CHECK_THROWS_WITH(infer::CachedDecoder(*model, 16), Catch::Contains("decoder: layer 0 linear head 0: groups[5] = 3 is outside 1..2"));
  groups[5] = 0;
  CHECK_THROWS_WITH(infer::CachedDecoder(*model, 16), Catch::Contains("groups[5] = 0 is outside 1..2"));
}
