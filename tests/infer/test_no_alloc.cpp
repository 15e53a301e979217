// "Sized once, nothing allocated per token": this test binary counts every way of getting memory
// (the global operator new; malloc, calloc, realloc, memalign, aligned_alloc and posix_memalign,
// which it replaces with counting ones over glibc's own; mmap, which it replaces with a counting
// system call) and notes who called. Prefill (after the first) and decode steps must call none of
// them, from headwise's code or OpenMP's, with one exception outside headwise's hands: OpenBLAS
// 0.3.21's small-matrix GEMM kernels for AVX-512 (sgemm_small_kernel_*, used for the attention's
// small products) malloc per call; those are counted apart and shown.
// OpenMP's regions allocate a team record each (libgomp), one kept to a single thread by an if
// clause included: the kernels enter none for small work (kernels/cpu/parallel.hpp).
#include <catch2/catch.hpp>
// The replaced operators pair malloc with free by design; GCC, inlining a std::map node's
// allocation into its destruction, sees "operator new ... free" and warns at some -O levels.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <map>
#include <new>
#include <string>

#include "headwise/infer/generate.hpp"
#include "headwise/kernels/gemv.hpp"
#include "infer/infer_fixture.hpp"

namespace {
std::atomic<long> g_news{0}, g_mallocs{0}, g_mmaps{0};
// The callers of the allocations made while a window is open (the first kMaxCallers).
constexpr int kMaxCallers = 4096;
std::atomic<bool> g_window{false};
std::atomic<int> g_n_callers{0};
void* g_callers[kMaxCallers];
inline void note(std::atomic<long>& counter, void* caller) {
  counter.fetch_add(1, std::memory_order_relaxed);
  if (g_window.load(std::memory_order_relaxed)) {
    const int i = g_n_callers.fetch_add(1, std::memory_order_relaxed);
    if (i < kMaxCallers) g_callers[i] = caller;
  }
}
void* counted(std::size_t n, std::size_t align, void* caller) {
  note(g_news, caller);
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t) ? std::aligned_alloc(align, (n + align - 1) / align * align) : std::malloc(n);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

// glibc's allocator under its own names (exported for exactly this: replacing malloc).
extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void* malloc(std::size_t n) {
  note(g_mallocs, __builtin_return_address(0));
  return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
  note(g_mallocs, __builtin_return_address(0));
  return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
  note(g_mallocs, __builtin_return_address(0));
  return __libc_realloc(p, n);
}
void* memalign(std::size_t align, std::size_t n) {
  note(g_mallocs, __builtin_return_address(0));
  return __libc_memalign(align, n);
}
void* aligned_alloc(std::size_t align, std::size_t n) {
  note(g_mallocs, __builtin_return_address(0));
  return __libc_memalign(align, n);
}
int posix_memalign(void** out, std::size_t align, std::size_t n) {
  note(g_mallocs, __builtin_return_address(0));
  if (align % sizeof(void*) != 0 || (align & (align - 1)) != 0) return EINVAL;
  void* p = __libc_memalign(align, n);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}
void* mmap(void* addr, std::size_t len, int prot, int flags, int fd, off_t off) {
  note(g_mmaps, __builtin_return_address(0));
  return reinterpret_cast<void*>(::syscall(SYS_mmap, addr, len, prot, flags, fd, off));
}
void* mmap64(void* addr, std::size_t len, int prot, int flags, int fd, off_t off) {
  note(g_mmaps, __builtin_return_address(0));
  return reinterpret_cast<void*>(::syscall(SYS_mmap, addr, len, prot, flags, fd, off));
}
}

void* operator new(std::size_t n) { return counted(n, 0, __builtin_return_address(0)); }
void* operator new[](std::size_t n) { return counted(n, 0, __builtin_return_address(0)); }
void* operator new(std::size_t n, std::align_val_t a) { return counted(n, std::size_t(a), __builtin_return_address(0)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted(n, std::size_t(a), __builtin_return_address(0)); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace {
// Every count at one moment: a step's allocations are the difference of two.
struct Counts {
  long news = g_news.load(), mallocs = g_mallocs.load(), mmaps = g_mmaps.load();
};
// What was allocated between open() and close(), and by whom.
struct Window {
  Counts start;
  long news = 0, mallocs = 0, mmaps = 0;
  std::map<std::string, int> callers;  // "library: function" -> allocations
  int openblas = 0;                    // of them, made inside OpenBLAS
  void open() {
    g_n_callers = 0;
    start = Counts();
    g_window = true;
  }
  void close() {
    g_window = false;
    const Counts end;
    news = end.news - start.news, mallocs = end.mallocs - start.mallocs, mmaps = end.mmaps - start.mmaps;
    for (int i = 0; i < std::min(kMaxCallers, g_n_callers.load()); ++i) {  // (close allocates: not counted)
      Dl_info d{};
      std::string lib = "?", fn = "?";
      if (dladdr(g_callers[i], &d) != 0) {
        if (d.dli_fname) lib = d.dli_fname;
        if (d.dli_sname) fn = d.dli_sname;
      }
      lib = lib.substr(lib.rfind('/') + 1);
      openblas += lib.rfind("libopenblas", 0) == 0;
      ++callers[lib + ": " + fn];
    }
  }
  long total() const { return news + mallocs + mmaps; }
  std::string str() const {
    std::string s = "operator new " + std::to_string(news) + ", malloc family " + std::to_string(mallocs) + ", mmap " +
                    std::to_string(mmaps) + "; callers:";
    for (const auto& [who, n] : callers) s += " " + who + " x" + std::to_string(n) + ";";
    return s;
  }
};

// Prefill of 20 tokens after a warm-up, then 20 decode steps, each in its own window.
void check_prefill_and_steps(hw::infer::CachedDecoder& dec, hw::infer::Sampler& sampler, const std::vector<int32_t>& tokens,
                             const std::string& what) {
  dec.prefill(tokens.data(), 12);  // warm-up: OpenMP and OpenBLAS set up their threads here
  dec.reset();
  Window prefill, steps;
  prefill.open();
  const float* logits = dec.prefill(tokens.data(), 20);
  prefill.close();
  steps.open();
  for (int t = 20; t < 40; ++t) logits = dec.step(sampler.next(logits));
  steps.close();
  INFO(what << "\nprefill: " << prefill.str() << "\nsteps: " << steps.str());
  CHECK(prefill.total() == prefill.openblas);  // nothing but OpenBLAS's small-matrix kernels
  CHECK(steps.total() == steps.openblas);
}
}  // namespace

using namespace hw;
using namespace hw::test;

TEST_CASE("decode: prefill and decode steps allocate nothing outside OpenBLAS (the cache is sized once)", "[infer]") {
  const InferCase c{"mixed", 2, "rope",
                    R"([["softmax","window:3","sink_window:2:5","static"],["linear","pruned","window:6","sink_window:1:3"]])"};
  const ModelConfig cfg = infer_config(c);
  auto model = infer_model(cfg);
  const auto tokens = random_tokens(40, cfg.vocab_size, 2);
  // fp32 and 16-bit cache rows (a prefill widens the 16-bit rows into scratch sized once)
  for (auto kv : {attn::KvPrecision::FP32, attn::KvPrecision::BF16}) {
    infer::CachedDecoder dec(*model, cfg.block_size, 8, 512, infer::WeightPrecision::FP32, {}, kv);
    infer::SamplingOptions o;
    o.top_k = 5;
    o.top_p = 0.9;
    infer::Sampler sampler(o, cfg.vocab_size);
    check_prefill_and_steps(dec, sampler, tokens, attn::kv_precision_name(kv));
  }
}

TEST_CASE("decode's allocation counters count each kind of allocation", "[infer]") {
  // Through volatile pointers, so that the compiler cannot pair and drop them.
  void* (*volatile m)(std::size_t) = &std::malloc;
  void* (*volatile c)(std::size_t, std::size_t) = &std::calloc;
  void* (*volatile r)(void*, std::size_t) = &std::realloc;
  void* (*volatile mm)(void*, std::size_t, int, int, int, off_t) = &::mmap;
  Counts a;
  std::vector<int>* v = new std::vector<int>(3);
  Counts b;
  CHECK(b.news > a.news);
  delete v;
  void* p = m(100);
  Counts c1;
  CHECK(c1.mallocs > b.mallocs);
  p = r(p, 5000);
  Counts c2;
  CHECK(c2.mallocs > c1.mallocs);
  std::free(p);
  p = c(10, 10);
  Counts c3;
  CHECK(c3.mallocs > c2.mallocs);
  std::free(p);
  void* page = mm(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  Counts c4;
  REQUIRE(page != MAP_FAILED);
  CHECK(c4.mmaps > c3.mmaps);
  ::munmap(page, 4096);
}

TEST_CASE("decode: with bf16 / fp16 weights (every kernel), prefill and decode steps allocate nothing outside OpenBLAS",
          "[infer][half]") {
  const InferCase c{"half", 2, "learned", R"([["softmax","window:3","sink_window:2:5","softmax"],["window:6","softmax","softmax","softmax"]])"};
  const ModelConfig cfg = infer_config(c);
  auto model = infer_model(cfg);
  const auto tokens = random_tokens(40, cfg.vocab_size, 2);
  for (auto w : {infer::WeightPrecision::BF16, infer::WeightPrecision::FP16})
    for (cpu::HalfKernel k : {cpu::HalfKernel::Plain, cpu::HalfKernel::Widen, cpu::HalfKernel::Bf16Dot}) {
      cpu::force_half_kernel(k);
      infer::CachedDecoder dec(*model, cfg.block_size, 8, 512, w, {}, infer::kv_precision_for(w, ""));  // fp16 rows
      infer::SamplingOptions o;
      infer::Sampler sampler(o, cfg.vocab_size);
      // (the prefill's weight panel is sized by the constructor)
      check_prefill_and_steps(dec, sampler, tokens,
                              std::string(infer::weight_precision_name(w)) + " " +
                                  cpu::half_kernel_name(w == infer::WeightPrecision::BF16 ? cpu::HalfType::BF16
                                                                                          : cpu::HalfType::F16,
                                                        cfg.n_embd));
    }
  cpu::force_half_kernel(cpu::HalfKernel::Auto);
}
