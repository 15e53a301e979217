// Cached greedy decoding of the Llama-family fixtures: the same tokens as transformers' greedy
// generate (prompt + 32), and, under a streaming (sink_window) plan on the GQA models, the same
// tokens as the argmax of the training forward over the whole sequence at every step.
#include <catch2/catch.hpp>

#include "headwise/infer/generate.hpp"
#include "model/llama_fixture.hpp"

using namespace hw;

TEST_CASE("greedy decoding of Llama, Qwen2 and Qwen3 equals transformers' greedy generate",
          "[infer][llama]") {
  for (const char* name : {"llama", "qwen2", "qwen3"}) {
    INFO(name);
    test::LlamaFixture f(name);
    const std::vector<int32_t> prompt = f.ids("greedy_prompt"), want = f.ids("greedy_tokens");
    const int64_t new_tokens = int64_t(want.size() - prompt.size());
    REQUIRE(new_tokens == 32);
    infer::CachedDecoder dec(*f.model, f.model->config().block_size, /*chunk=*/3);
    infer::Sampler greedy({0.0}, f.model->config().vocab_size);
    std::vector<int32_t> got = prompt;
    for (int32_t t : infer::generate(dec, greedy, prompt, new_tokens)) got.push_back(t);
    CHECK(got == want);
  }
}

TEST_CASE("a streaming plan on the GQA fixtures decodes as the full forward's argmax", "[infer][llama]") {
  for (const char* name : {"llama", "qwen3"}) {
    INFO(name);
    test::LlamaFixture f(name);
    const ModelConfig& c = f.model->config();
    REQUIRE(c.kv_heads() < c.n_head);
    // Both query heads of a KV head stream (the cache keeps sink + ring), the rest stay full.
    f.model->install_plan(attn::HeadPlan::from_json(nlohmann::json::parse(
                              R"([["sink_window:2:5", "sink_window:2:5", "softmax", "softmax"],
                                  ["softmax", "softmax", "sink_window:1:4", "sink_window:1:4"]])")),
                          {});
    std::vector<int32_t> seq = f.ids("greedy_prompt");
    const size_t n_prompt = seq.size();
    infer::CachedDecoder dec(*f.model, c.block_size, /*chunk=*/4);
    infer::Sampler greedy({0.0}, c.vocab_size);
    const std::vector<int32_t> cached = infer::generate(dec, greedy, seq, 24);
    std::vector<float> logits;
    for (int step = 0; step < 24; ++step) {
      const int64_t T = int64_t(seq.size());
      f.model->forward(seq.data(), nullptr, 1, T);
      f.model->read_logits(logits);
      seq.push_back(infer::argmax(logits.data() + (T - 1) * c.vocab_size, c.vocab_size));
    }
    CHECK(std::vector<int32_t>(seq.begin() + long(n_prompt), seq.end()) == cached);
  }
}
