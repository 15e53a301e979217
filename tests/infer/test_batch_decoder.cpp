// Batched decoding (infer/batch_decoder.hpp, generate_batch.hpp) against decoding each prompt
// alone: GPT-2, Llama (GQA) and Qwen3 fixtures under mixed plans whose rings wrap, prompts of
// different lengths that finish at different steps, more sequences than slots (slots reused),
// early stops, per-sequence sampling streams; and the KV bytes against a hand count.
// Sequences alone: infer::generate on a fresh CachedDecoder per prompt (whose prefill + decode equals
// the training forward: test_decoder.cpp); for GPT-2 also the training forward's argmax itself.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "headwise/infer/generate.hpp"
#include "headwise/infer/generate_batch.hpp"
#include "infer/infer_fixture.hpp"
#include "model/llama_fixture.hpp"
#include "support/rel_err.hpp"

using namespace hw;
using namespace hw::test;

namespace {

// A fixture's model under `plan`, with random static and linear head values and its weights
// perturbed like infer_model's (tiny inits give nearly flat logits: every prompt would decode to
// the same tokens, and a batch that mixed its sequences up could go unseen).
std::unique_ptr<Model<float>> fixture_model(const std::string& name, const char* plan) {
  auto m = load_model(fixture_dir("hf_tiny_" + name), cpu_backend<float>());
  const ModelConfig cfg = m->config();
  const attn::HeadPlan hp = attn::HeadPlan::from_json(nlohmann::json::parse(plan));
  HeadExtras extras;
  Rng rng(77);
  for (int l = 0; l < cfg.n_layer; ++l)
    for (int h = 0; h < cfg.n_head; ++h) {
      const auto kind = hp.layers[size_t(l)][size_t(h)].kind;
      if (kind == attn::HeadKind::Static) {
        StaticHeadValues v = default_static_values(cfg.block_size);
        for (auto& a : v.alpha) a = float(0.7 * rng.normal());
        for (auto& r : v.rho) r = float(0.7 * rng.normal());
        extras.statics[{l, h}] = v;
      } else if (kind == attn::HeadKind::Linear) {
        LinearHeadValues v;
        v.n_groups = 2;
        v.L.assign(9, 0.f);
        for (int a = 0; a < 3; ++a)
          for (int b = 0; b <= a; ++b) v.L[size_t(a * 3 + b)] = float(0.6 * rng.normal());
        for (int r = 0; r < cfg.head_dim(); ++r) v.groups.push_back(1 + r % 2);
        extras.linears[{l, h}] = v;
      }
    }
  m->install_plan(hp, extras);
  for (const auto& t : m->params().tensors()) {
    if (t->name.find(".linear.") != std::string::npos) continue;
    for (int64_t i = 0; i < t->numel(); ++i) t->f32()[i] += float(0.1 * rng.normal());
  }
  return m;
}

// Mixed plans: GPT-2 (MHA): softmax, window:3, sink_window:2:4 (a 6-slot ring), static; linear,
// pruned, sink_window:1:5, softmax. Llama / Qwen3 (2 KV heads of 2 query heads): layer 0 a ring
// of S = 2, W = 4 and a full head shared by softmax + static; layer 1 a ring of W = 5 that also
// keeps a linear state, and a full head shared by softmax + sink_window:1:3.
const char* kGpt2Plan = R"([["softmax","window:3","sink_window:2:4","static"],["linear","pruned","sink_window:1:5","softmax"]])";
const char* kGqaPlan = R"([["sink_window:2:4","sink_window:2:4","softmax","static"],["window:5","linear","softmax","sink_window:1:3"]])";

// Eight prompts of lengths 1..17 and new-token counts 6..15: every ring (at most 7 slots) wraps,
// and the sequences finish at different steps.
const int64_t kLens[8] = {5, 1, 12, 3, 17, 2, 9, 7};
const int64_t kNew[8] = {10, 14, 6, 12, 8, 15, 11, 9};

std::vector<infer::SequenceRequest> requests(int vocab, const infer::SamplingOptions& s, int n = 8) {
  std::vector<infer::SequenceRequest> r;
  for (int i = 0; i < n; ++i) r.push_back({random_tokens(kLens[i], vocab, 100 + uint64_t(i)), kNew[i], s, {}});
  return r;
}

// Each request decoded alone: a fresh CachedDecoder, generate(), a Sampler on the sequence's stream.
std::vector<int32_t> alone(const Model<float>& m, const infer::SequenceRequest& r, size_t index) {
  infer::CachedDecoder dec(m, m.config().block_size);
  infer::Sampler s(r.sampling, m.config().vocab_size, index);
  return infer::generate(dec, s, r.prompt, r.max_new, {}, nullptr, r.stop);
}

infer::BatchDecoderOptions batch_options(const Model<float>& m, int B, int64_t chunk) {
  infer::BatchDecoderOptions o;
  o.max_batch = B;
  o.max_context = m.config().block_size;
  o.chunk = chunk;
  return o;
}

}  // namespace

TEST_CASE("batch decode: greedy tokens of B = 1, 3, 8 equal each prompt decoded alone (GPT-2, Llama, Qwen3, "
          "mixed plans, rings wrapped, slots reused)",
          "[infer][batch]") {
  for (const auto& [name, plan] : {std::pair<std::string, const char*>{"gpt2", kGpt2Plan},
                                   {"llama", kGqaPlan},
                                   {"qwen3", kGqaPlan}}) {
    INFO(name);
    auto m = fixture_model(name, plan);
    const int V = m->config().vocab_size;
    const auto reqs = requests(V, {0.0});
    std::vector<std::vector<int32_t>> want;
    for (size_t i = 0; i < reqs.size(); ++i) {
      want.push_back(alone(*m, reqs[i], i));
      REQUIRE(int64_t(want.back().size()) == kNew[i]);
    }
    // The prompts lead somewhere different: a batch that crossed its sequences would show.
    CHECK(std::set<std::vector<int32_t>>(want.begin(), want.end()).size() == want.size());
    if (name == "gpt2") {  // the independent reference: the training forward's argmax at every step
      for (size_t i = 0; i < reqs.size(); ++i) {
        std::vector<int32_t> seq = reqs[i].prompt;
        std::vector<float> logits;
        for (int64_t k = 0; k < kNew[i]; ++k) {
          const int64_t T = int64_t(seq.size());
          m->forward(seq.data(), nullptr, 1, T);
          m->read_logits(logits);
          seq.push_back(infer::argmax(logits.data() + (T - 1) * V, V));
        }
        CHECK(std::vector<int32_t>(seq.begin() + kLens[i], seq.end()) == want[i]);
      }
    }
    for (int B : {1, 3, 8}) {
      INFO("B = " << B);
      // chunk 4: the longer prompts take several passes beside the other sequences' single rows
      infer::BatchDecoder dec(*m, batch_options(*m, B, 4));
      infer::BatchTimes t;
      std::vector<std::vector<int32_t>> streamed(reqs.size());
      const auto got =
          infer::generate_batch(dec, reqs, [&](size_t i, int32_t tok) { streamed[i].push_back(tok); }, &t);
      CHECK(got == want);
      CHECK(streamed == want);
      CHECK(t.max_live == B);
      CHECK(dec.live() == 0);  // every finished sequence closed its slot
      CHECK(t.first_tokens + t.decode_tokens == 10 + 14 + 6 + 12 + 8 + 15 + 11 + 9);
      // with every sequence in at once, the batch lives as long as the longest (15 new tokens)
      if (B == 8) CHECK(t.steps == 15);
    }
  }
}

TEST_CASE("batch decode: sampled tokens follow each sequence's own stream (seed, index)", "[infer][batch]") {
  auto m = fixture_model("llama", kGqaPlan);
  infer::SamplingOptions s;
  s.temperature = 0.9;
  s.top_k = 20;
  s.top_p = 0.95;
  s.seed = 7;
  auto reqs = requests(m->config().vocab_size, s, 4);
  reqs[3].prompt = reqs[1].prompt;  // the same prompt twice: streams 1 and 3 draw differently
  reqs[3].max_new = reqs[1].max_new;
  infer::BatchDecoder dec(*m, batch_options(*m, 3, 64));
  const auto got = infer::generate_batch(dec, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO(i);
    CHECK(got[i] == alone(*m, reqs[i], i));
  }
  CHECK(got[1] != got[3]);
}

TEST_CASE("batch decode: a sequence that stops early frees its slot for the next, tokens unchanged",
          "[infer][batch]") {
  auto m = fixture_model("qwen3", kGqaPlan);
  const int V = m->config().vocab_size;
  auto reqs = requests(V, {0.0}, 5);
  // Sequence 0 stops at its 3rd new token (the first occurrence of that token in its greedy run).
  const auto full0 = alone(*m, reqs[0], 0);
  size_t k = 2;
  while (k < full0.size() && std::find(full0.begin(), full0.begin() + long(k), full0[k]) != full0.begin() + long(k)) ++k;
  REQUIRE(k + 1 < full0.size());
  reqs[0].stop = {full0[k]};
  infer::BatchDecoder dec(*m, batch_options(*m, 2, 4));
  // Slot use: sequence 0 and 1 start in slots 0 and 1; 0 stops after k + 1 tokens and sequence 2
  // takes its slot at the next step.
  const auto got = infer::generate_batch(dec, reqs);
  CHECK(got[0] == std::vector<int32_t>(full0.begin(), full0.begin() + long(k) + 1));
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO(i);
    CHECK(got[i] == alone(*m, reqs[i], i));
  }

  SECTION("through the engine: close, reopen, and the reused slot starts empty") {
    const auto& p0 = reqs[0].prompt;
    const auto& p1 = reqs[2].prompt;
    const auto& p2 = reqs[4].prompt;
    REQUIRE(dec.live() == 0);
    const int a = dec.open(), b = dec.open();
    CHECK((a == 0 && b == 1));
    CHECK_THROWS_WITH(dec.open(), Catch::Contains("all 2 slots are open"));
    dec.feed({{a, p0.data(), int64_t(p0.size())}, {b, p1.data(), int64_t(p1.size())}});
    const int32_t next = 3;
    dec.feed({{a, &next, 1}, {b, &next, 1}});
    dec.close(a);
    CHECK(dec.live() == 1);
    const int c = dec.open();
    CHECK(c == a);
    CHECK(dec.position(c) == 0);
    dec.feed({{c, p2.data(), int64_t(p2.size())}, {b, &next, 1}});
    infer::CachedDecoder ref(*m, m->config().block_size);
    const float* want = ref.prefill(p2.data(), int64_t(p2.size()));
    const float* lg = dec.logits(c);
    // (to rounding: the engine groups rows into passes differently from a lone decoder; a cache
    // that kept the closed sequence's rows is off by the order of the logits themselves)
    CHECK(max_rel_err(lg, want, V) < 1e-5);
    infer::CachedDecoder ref_b(*m, m->config().block_size);
    ref_b.prefill(p1.data(), int64_t(p1.size()));
    ref_b.step(next);
    const float* want_b = ref_b.step(next);
    const float* lg_b = dec.logits(b);
    CHECK(max_rel_err(lg_b, want_b, V) < 1e-5);
    CHECK(dec.position(b) == int64_t(p1.size()) + 2);
  }
}

TEST_CASE("batch decode: KV bytes per sequence equal a hand count from the plan", "[infer][batch]") {
  // attn::KvCache::bytes_for is the one sizing rule (kv_cache_bytes and the caches the decoders
  // allocate use it); this hand count is its independent check.
  // 2 layers, 4 query heads on 2 KV heads, D = 8, context T = 40:
  //   layer 0 KV 0: softmax + window:3          -> every position, K and V: 2 x 40 rows
  //   layer 0 KV 1: sink_window:2:5 + static    -> every position (static), K (sink_window) and V
  //   layer 1 KV 0: linear + pruned             -> no rows, the linear state (1 + 8 + 36) x 9 fp32
  //   layer 1 KV 1: window:6 + sink_window:1:3  -> a ring of S = 1 + W = 6 = 7 slots, K and V
  const InferCase c{"mixed", 2, "rope",
                    R"([["softmax","window:3","sink_window:2:5","static"],["linear","pruned","window:6","sink_window:1:3"]])"};
  const ModelConfig cfg = infer_config(c);
  auto model = infer_model(cfg);
  const int64_t D = 8, T = 40, state = 4 * (1 + 8 + 36) * 9;
  for (auto [kv, bpv] : {std::pair<attn::KvPrecision, int64_t>{attn::KvPrecision::FP32, 4},
                         {attn::KvPrecision::BF16, 2},
                         {attn::KvPrecision::FP16, 2}}) {
    INFO(attn::kv_precision_name(kv));
    const int64_t want = bpv * D * (2 * T) + bpv * D * (2 * T) + state + bpv * D * (2 * 7);
    // the one sizing rule, and the cache it sizes, against the hand count
    CHECK(int64_t(attn::KvCache::bytes_for(cfg.head_plan, cfg.n_head, cfg.kv_heads(), int(D), T, kv)) == want);
    CHECK(int64_t(attn::KvCache(cfg.head_plan, cfg.n_head, cfg.kv_heads(), int(D), T, kv).bytes()) == want);
    CHECK(int64_t(infer::kv_cache_bytes(cfg, cfg.head_plan, T, kv)) == want);
    infer::BatchDecoderOptions o;
    o.max_batch = 3;
    o.max_context = T;
    o.kv = kv;
    infer::BatchDecoder dec(*model, o);
    CHECK(int64_t(dec.cache_bytes()) == want);
    // all-softmax on the same shape: 2 layers x 2 KV heads x K and V x T rows
    const auto soft = attn::HeadPlan::uniform(cfg.n_layer, cfg.n_head);
    CHECK(int64_t(infer::kv_cache_bytes(cfg, soft, T, kv)) == 2 * 2 * 2 * T * D * bpv);
  }
  CHECK(infer::kv_cache_bytes(cfg, cfg.head_plan, 40, attn::KvPrecision::FP32) == 2560 + 2560 + 1620 + 448);
  // A context inside the ring (S + W = 7 >= 6): the ring head keeps every position instead.
  CHECK(int64_t(infer::kv_cache_bytes(cfg, cfg.head_plan, 6, attn::KvPrecision::FP32)) ==
        4 * D * (2 * 6) * 3 + state);
}

TEST_CASE("batch decode: bad use is one clear error, and a refused feed advances no slot", "[infer][batch]") {
  const InferCase c{"mixed", 2, "rope",
                    R"([["softmax","window:3","sink_window:2:5","static"],["linear","pruned","window:6","sink_window:1:3"]])"};
  const ModelConfig cfg = infer_config(c);
  auto model = infer_model(cfg);
  infer::BatchDecoderOptions o;
  o.max_batch = 2;
  o.max_context = 10;
  infer::BatchDecoder dec(*model, o);
  const int a = dec.open(), b = dec.open();
  const std::vector<int32_t> ok = {1, 2, 3}, bad = {1, cfg.vocab_size};
  CHECK_THROWS_WITH(dec.feed({{a, ok.data(), 3}, {b, bad.data(), 2}}),
                    Catch::Contains("slot 1: token 29 is outside the vocabulary of 29"));
  CHECK(dec.position(a) == 0);
  CHECK_THROWS_WITH(dec.feed({{a, ok.data(), 3}, {a, ok.data(), 3}}), Catch::Contains("slot 0 is listed twice"));
  dec.feed({{a, ok.data(), 3}});
  CHECK_THROWS_WITH(dec.logits(b), Catch::Contains("slot 1 has been fed nothing"));
  const std::vector<int32_t> eight(8, 1);
  CHECK_THROWS_WITH(dec.feed({{a, eight.data(), 8}}), Catch::Contains("8 tokens at position 3 pass the context of 10"));
  dec.close(b);
  CHECK_THROWS_WITH(dec.feed({{b, ok.data(), 3}}), Catch::Contains("slot 1 is not open"));
  CHECK_THROWS_WITH(dec.close(b), Catch::Contains("slot 1 is not open"));
  o.max_context = cfg.block_size + 1;
  CHECK_THROWS_WITH(infer::BatchDecoder(*model, o), Catch::Contains("block_size"));
  dec.close(a);
  // generate_batch names the sequence, before decoding anything
  std::vector<infer::SequenceRequest> reqs = {{{1, 2}, 3, {0.0}, {}}, {{}, 3, {0.0}, {}}};
  CHECK_THROWS_WITH(infer::generate_batch(dec, reqs), Catch::Contains("sequence 1: the prompt is empty"));
  reqs[1] = {{4, 5, 6, 7, 8}, 7, {0.0}, {}};
  CHECK_THROWS_WITH(infer::generate_batch(dec, reqs), Catch::Contains("sequence 1: the prompt (5 tokens) and 7 new"));
  reqs[1] = {{4, 99}, 2, {0.0}, {}};
  CHECK_THROWS_WITH(infer::generate_batch(dec, reqs), Catch::Contains("sequence 1: token 99 is outside"));
  CHECK(dec.live() == 0);
}

// A shared prompt (bench-infer --batch --shared-prompt, as llama-batched-bench -pps): a slot
// copied from a fed one decodes exactly as one fed the same prompt, on a plan whose rings wrap
// and whose linear head keeps a state.
TEST_CASE("batch decode: copy_slot makes a slot decode as if it had been fed the same prompt", "[infer][batch]") {
  auto m = fixture_model("llama", kGqaPlan);
  const int V = m->config().vocab_size;
  const auto prompt = random_tokens(13, V, 7);
  infer::BatchDecoder dec(*m, batch_options(*m, 3, 4));
  const int a = dec.open(), b = dec.open(), c = dec.open();
  dec.feed({{a, prompt.data(), int64_t(prompt.size())}, {c, prompt.data(), int64_t(prompt.size())}});
  CHECK_THROWS_WITH(dec.copy_slot(b, a), Catch::Contains("slot 1 has been fed nothing"));
  dec.copy_slot(a, b);
  CHECK(dec.position(b) == int64_t(prompt.size()));
  std::vector<int32_t> next = {infer::argmax(dec.logits(a), V), 0, 0};
  for (int step = 0; step < 9; ++step) {  // every slot the same token: b and c must agree with a to the bit
    const int32_t t = step == 0 ? next[0] : infer::argmax(dec.logits(a), V);
    dec.feed({{a, &t, 1}, {b, &t, 1}, {c, &t, 1}});
    for (int s : {b, c}) {
      INFO("step " << step << " slot " << s);
      CHECK(std::equal(dec.logits(s), dec.logits(s) + V, dec.logits(a)));
    }
  }
}
