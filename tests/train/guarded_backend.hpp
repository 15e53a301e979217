#pragma once
// A test backend whose memory host code may touch only through copy_to_device / copy_to_host,
// as with a GPU: it forwards every op to the CPU backend, and while armed it keeps the pages of
// the watched arenas inaccessible (PROT_NONE) except during an op or a copy. Any other host
// read or write of that memory (a memcpy, a loop over a tensor, Arena::zero) is a SIGSEGV,
// which Catch reports as a failure of the running test. It also counts the copies, so a test
// can assert that a step copies only its inputs in.
//
// Only whole pages inside an arena's block are guarded (the partial pages at its ends may hold
// other heap data), so watch arenas of at least a few pages. Arenas must not be freed or
// re-allocated while armed (plan changes, a new activation shape): disarm first.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <utility>
#include <vector>

#include "headwise/core/arena.hpp"
#include "headwise/kernels/backend.hpp"

namespace hw::test {

class GuardedBackend final : public Backend<float> {
 public:
  struct Counts {
    int64_t to_device = 0, to_host = 0;
    size_t bytes_to_device = 0, bytes_to_host = 0;
  };

  ~GuardedBackend() override { disarm(); }

  // Guard the whole pages of `a`'s block (from now until disarm; call before arm()).
  void watch(const Arena& a) {
    const auto page = uintptr_t(sysconf(_SC_PAGESIZE));
    const auto lo = (uintptr_t(a.base()) + page - 1) / page * page;
    const auto hi = (uintptr_t(a.base()) + a.bytes()) / page * page;
    if (hi > lo) pages_.emplace_back(reinterpret_cast<void*>(lo), size_t(hi - lo));
  }
  // Forget every watched block (disarmed only: a caller's arenas are about to move).
  void unwatch_all() {
    disarm();
    pages_.clear();
  }
  size_t guarded_bytes() const {
    size_t n = 0;
    for (const auto& p : pages_) n += p.second;
    return n;
  }
  void arm() {
    armed_ = true;
    protect(PROT_NONE);
  }
  void disarm() {
    if (armed_) protect(PROT_READ | PROT_WRITE);
    armed_ = false;
  }
  Counts counts() const { return counts_; }
  void reset_counts() { counts_ = {}; }

  Device device() const override { return Device::CPU; }
  const char* name() const override { return "guarded-cpu"; }

  void matmul_forward(float* out, const float* inp, const float* w, const float* bias, int64_t N, int64_t I,
                      int64_t O, bool w_out_in) const override {
    Open o(*this);
    cpu().matmul_forward(out, inp, w, bias, N, I, O, w_out_in);
  }
  void matmul_backward(float* dinp, float* dw, float* dbias, const float* dout, const float* inp, const float* w,
                       int64_t N, int64_t I, int64_t O, bool w_out_in) const override {
    Open o(*this);
    cpu().matmul_backward(dinp, dw, dbias, dout, inp, w, N, I, O, w_out_in);
  }
  void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                         int64_t N, int64_t C, double eps) const override {
    Open o(*this);
    cpu().layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, eps);
  }
  void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                          const float* weight, const float* mean, const float* rstd, int64_t N,
                          int64_t C) const override {
    Open o(*this);
    cpu().layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
  }
  void gelu_forward(float* out, const float* inp, int64_t n) const override {
    Open o(*this);
    cpu().gelu_forward(out, inp, n);
  }
  void gelu_backward(float* dinp, const float* inp, const float* dout, int64_t n) const override {
    Open o(*this);
    cpu().gelu_backward(dinp, inp, dout, n);
  }
  void encoder_forward(float* out, const int32_t* tokens, const float* wte, const float* wpe, int64_t B, int64_t T,
                       int64_t C) const override {
    Open o(*this);
    cpu().encoder_forward(out, tokens, wte, wpe, B, T, C);
  }
  void encoder_backward(float* dwte, float* dwpe, const float* dout, const int32_t* tokens, int64_t B, int64_t T,
                        int64_t C) const override {
    Open o(*this);
    cpu().encoder_backward(dwte, dwpe, dout, tokens, B, T, C);
  }
  void residual_forward(float* out, const float* a, const float* b, int64_t n) const override {
    Open o(*this);
    cpu().residual_forward(out, a, b, n);
  }
  void accumulate(float* dst, const float* src, int64_t n) const override {
    Open o(*this);
    cpu().accumulate(dst, src, n);
  }
  double crossentropy_forward_backward(float* losses, float* dlogits, const float* logits, const int32_t* targets,
                                       int64_t N, int64_t V, double dloss) const override {
    Open o(*this);
    return cpu().crossentropy_forward_backward(losses, dlogits, logits, targets, N, V, dloss);
  }
  void rope_forward(float* x, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                    double theta) const override {
    Open o(*this);
    cpu().rope_forward(x, B, T, row_stride, col0, n_heads, hd, theta);
  }
  void rope_backward(float* dx, int64_t B, int64_t T, int64_t row_stride, int64_t col0, int64_t n_heads, int64_t hd,
                     double theta) const override {
    Open o(*this);
    cpu().rope_backward(dx, B, T, row_stride, col0, n_heads, hd, theta);
  }
  double sum_squares(const float* x, int64_t n) const override {
    Open o(*this);
    return cpu().sum_squares(x, n);
  }
  void scale(float* x, float s, int64_t n) const override {
    Open o(*this);
    cpu().scale(x, s, n);
  }
  void fill_zero(float* x, int64_t n) const override {
    Open o(*this);
    cpu().fill_zero(x, n);
  }
  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s) const override {
    Open o(*this);
    cpu().adamw_update(p, g, m, v, n, s);
  }
  void copy_to_device(void* dst, const void* host_src, size_t bytes) const override {
    Open o(*this);
    counts_.to_device += 1;
    counts_.bytes_to_device += bytes;
    cpu().copy_to_device(dst, host_src, bytes);
  }
  void copy_to_host(void* host_dst, const void* src, size_t bytes) const override {
    Open o(*this);
    counts_.to_host += 1;
    counts_.bytes_to_host += bytes;
    cpu().copy_to_host(host_dst, src, bytes);
  }
  void attention_forward(const attn::LayerPlan& plan, const attn::LayerLayout& layout, const attn::AttnDims& dims,
                         const attn::LayerHeadParams<float>& params, const float* qkv, float* out, float* row_stats,
                         float* workspace) const override {
    Open o(*this);
    cpu().attention_forward(plan, layout, dims, params, qkv, out, row_stats, workspace);
  }
  void attention_backward(const attn::LayerPlan& plan, const attn::LayerLayout& layout, const attn::AttnDims& dims,
                          const attn::LayerHeadParams<float>& params, const float* qkv, const float* out,
                          const float* row_stats, const float* dout, float* dqkv, float* workspace) const override {
    Open o(*this);
    cpu().attention_backward(plan, layout, dims, params, qkv, out, row_stats, dout, dqkv, workspace);
  }
  int64_t attention_workspace_size(const attn::LayerPlan& plan, const attn::LayerLayout& layout,
                                   const attn::AttnDims& dims) const override {
    return cpu().attention_workspace_size(plan, layout, dims);
  }

 private:
  static const Backend<float>& cpu() { return cpu_backend<float>(); }

  void protect(int prot) const {
    for (const auto& [p, n] : pages_)
      if (mprotect(p, n, prot) != 0) std::abort();  // cannot happen for pages of our own blocks
  }

  // The watched memory is accessible for the lifetime of one op or copy (ops do not nest).
  class Open {
   public:
    explicit Open(const GuardedBackend& b) : b_(b) {
      if (b_.armed_) b_.protect(PROT_READ | PROT_WRITE);
    }
    ~Open() {
      if (b_.armed_) b_.protect(PROT_NONE);
    }
    Open(const Open&) = delete;
    Open& operator=(const Open&) = delete;

   private:
    const GuardedBackend& b_;
  };

  std::vector<std::pair<void*, size_t>> pages_;
  bool armed_ = false;
  mutable Counts counts_;
};

// Armed for the lifetime of the object: declare it after the trainer or model that owns the
// watched arenas, so it disarms before they are freed.
class Armed {
 public:
  explicit Armed(GuardedBackend& b) : b_(b) { b_.arm(); }
  ~Armed() { b_.disarm(); }
  Armed(const Armed&) = delete;
  Armed& operator=(const Armed&) = delete;

 private:
  GuardedBackend& b_;
};

}  // namespace hw::test
