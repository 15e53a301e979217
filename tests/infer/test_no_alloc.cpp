// "Sized once, nothing allocated per token": this test binary replaces the global operator new
// with a counting one, and decode steps (and prefill after the first) must not call it.
#include <catch2/catch.hpp>
// The replaced operators pair malloc with free by design; GCC, inlining a std::map node's
// allocation into its destruction, sees "operator new ... free" and warns at some -O levels.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <atomic>
#include <cstdlib>
#include <new>

#include "headwise/infer/generate.hpp"
#include "headwise/kernels/gemv.hpp"
#include "infer/infer_fixture.hpp"

namespace {
std::atomic<long> g_news{0};
void* counted(std::size_t n, std::size_t align) {
  g_news.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align) : std::malloc(n);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) { return counted(n, 0); }
void* operator new[](std::size_t n) { return counted(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted(n, std::size_t(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted(n, std::size_t(a)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

using namespace hw;
using namespace hw::test;

TEST_CASE("decode: prefill and decode steps allocate nothing (the cache is sized once)", "[infer]") {
  const InferCase c{"mixed", 2, "rope",
                    R"([["softmax","window:3","sink_window:2:5","static"],["linear","pruned","window:6","sink_window:1:3"]])"};
  const ModelConfig cfg = infer_config(c);
  auto model = infer_model(cfg);
  const auto tokens = random_tokens(40, cfg.vocab_size, 2);
  long after = 0;
  // fp32 and 16-bit cache rows (a prefill widens the 16-bit rows into scratch sized once)
  for (auto kv : {infer::KvPrecision::FP32, infer::KvPrecision::BF16}) {
    infer::Decoder dec(*model, cfg.block_size, 8, 512, infer::WeightPrecision::FP32, {}, kv);
    infer::SamplingOptions o;
    o.top_k = 5;
    o.top_p = 0.9;
    infer::Sampler sampler(o, cfg.vocab_size);
    dec.prefill(tokens.data(), 12);  // warm-up: OpenMP and OpenBLAS set up their threads here
    dec.reset();
    const long before = g_news.load();
    const float* logits = dec.prefill(tokens.data(), 20);
    for (int t = 20; t < 40; ++t) logits = dec.step(sampler.next(logits));
    after = g_news.load();
    INFO(infer::kv_precision_name(kv));
    CHECK(after - before == 0);
  }
  // The counter does count: a vector allocates.
  std::vector<int>* v = new std::vector<int>(3);
  CHECK(g_news.load() > after);
  delete v;
}

TEST_CASE("decode: with bf16 / fp16 weights (every kernel), prefill and decode steps allocate nothing",
          "[infer][half]") {
  const InferCase c{"half", 2, "learned", R"([["softmax","window:3","sink_window:2:5","softmax"],["window:6","softmax","softmax","softmax"]])"};
  const ModelConfig cfg = infer_config(c);
  auto model = infer_model(cfg);
  const auto tokens = random_tokens(40, cfg.vocab_size, 2);
  for (auto w : {infer::WeightPrecision::BF16, infer::WeightPrecision::FP16})
    for (cpu::HalfKernel k : {cpu::HalfKernel::Plain, cpu::HalfKernel::Widen, cpu::HalfKernel::Bf16Dot}) {
      cpu::force_half_kernel(k);
      infer::Decoder dec(*model, cfg.block_size, 8, 512, w, {}, infer::kv_precision_for(w, ""));  // fp16 rows
      infer::SamplingOptions o;
      infer::Sampler sampler(o, cfg.vocab_size);
      dec.prefill(tokens.data(), 12);  // warm-up (threads; the prefill's weight panel is sized by the constructor)
      dec.reset();
      const long before = g_news.load();
      const float* logits = dec.prefill(tokens.data(), 20);
      for (int t = 20; t < 40; ++t) logits = dec.step(sampler.next(logits));
      const long after = g_news.load();  // (before INFO, which allocates its message)
      INFO(infer::weight_precision_name(w) << " "
                                             << cpu::half_kernel_name(w == infer::WeightPrecision::BF16 ? cpu::HalfType::BF16
                                                                                                 : cpu::HalfType::F16,
                                                                      cfg.n_embd));
      CHECK(after - before == 0);
    }
  cpu::force_half_kernel(cpu::HalfKernel::Auto);
}
