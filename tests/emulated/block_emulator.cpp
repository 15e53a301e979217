// The block emulator's fibers (block_emulator.hpp): fibers with their own stacks, a
// round-robin scheduler, and gates (barriers); the scheduler resumes a waiting fiber only once
// its gate has opened. A round in which no fiber can run and no gate opens is a deadlock.
#include "emulated/block_emulator.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "emulated/fiber_switch.hpp"
#include "emulated/shim/cuda_runtime.h"
#include "headwise/core/error.hpp"
#include "kernels/mma_emulation.hpp"

namespace hw_emu {
namespace {

constexpr int kGuardFloats = 1024;
constexpr uint32_t kGuardBits = 0x7fc0dead;  // a NaN payload no kernel writes
constexpr size_t kStackBytes = 256 * 1024;

// A barrier of `members` fibers: the last to arrive opens it (bumps the generation).
struct Gate {
  int arrived = 0;
  unsigned generation = 0;
};

struct WarpSlots {
  Gate gate;
  uint32_t a[32][4] = {};
  uint32_t b[32][2] = {};
  float c[32][4] = {};
  float v[32] = {};
};

struct Scheduler {
  FiberContext main_ctx;
  FiberContext ctx[kBlockThreads];
  const Gate* waiting_on[kBlockThreads] = {};  // the gate a fiber waits at (null: runnable)
  unsigned waiting_generation[kBlockThreads] = {};
  std::unique_ptr<char[]> stacks;
  ThreadPlace places[kBlockThreads];
  bool done[kBlockThreads] = {};
  int current = 0, live = 0;
  uint64_t progress = 0;  // gates opened + fibers finished
  Gate block_gate;
  WarpSlots warps[kWarps];
  const std::function<void(float*)>* body = nullptr;
  float* smem = nullptr;
};
Scheduler* g_sched = nullptr;

void yield_to_scheduler() { fiber_switch(g_sched->ctx[g_sched->current], g_sched->main_ctx); }

void open_gate(Gate& g) {
  g.arrived = 0;
  ++g.generation;
  ++g_sched->progress;
}

void wait_at(Gate& g, int members) {
  const unsigned mine = g.generation;
  if (++g.arrived == members) {
    open_gate(g);
    return;
  }
  Scheduler& s = *g_sched;
  s.waiting_on[s.current] = &g;
  s.waiting_generation[s.current] = mine;
  while (g.generation == mine) yield_to_scheduler();
  s.waiting_on[s.current] = nullptr;
}

[[noreturn]] void fiber_main() {
  Scheduler& s = *g_sched;
  const int me = s.current;
  (*s.body)(s.smem);
  // An exited thread stops counting for __syncthreads: the others may now be complete.
  s.done[me] = true;
  --s.live;
  ++s.progress;
  if (s.block_gate.arrived > 0 && s.block_gate.arrived == s.live) open_gate(s.block_gate);
  fiber_switch(s.ctx[me], s.main_ctx);  // never resumed
  std::abort();
}

WarpSlots& my_warp() { return g_sched->warps[g_sched->current / 32]; }
int my_lane() { return g_sched->current % 32; }

template <class Emulate>
void warp_mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], Emulate emulate) {
  WarpSlots& w = my_warp();
  const int l = my_lane();
  std::copy(a, a + 4, w.a[l]);
  std::copy(b, b + 2, w.b[l]);
  std::copy(d, d + 4, w.c[l]);
  wait_at(w.gate, 32);
  if (l == 0) emulate(w.a, w.b, w.c);
  wait_at(w.gate, 32);
  std::copy(w.c[l], w.c[l] + 4, d);
}

}  // namespace

void sync_block() { wait_at(g_sched->block_gate, g_sched->live); }

float shfl_xor(float v, int mask) {
  WarpSlots& w = my_warp();
  const int l = my_lane();
  w.v[l] = v;
  wait_at(w.gate, 32);
  const float r = w.v[l ^ mask];
  wait_at(w.gate, 32);
  return r;
}

void warp_mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  warp_mma(d, a, b, [](auto& A, auto& B, auto& C) { hw_test_mma::emulate_mma(A, B, C); });
}
void warp_mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  warp_mma(d, a, b, [](auto& A, auto& B, auto& C) { hw_test_mma::emulate_mma_tf32(A, B, C); });
}

struct BlockEmulator::Fibers : Scheduler {};

BlockEmulator::BlockEmulator() : fibers_(new Fibers) {
  fibers_->stacks.reset(new char[kStackBytes * kBlockThreads]);
}
BlockEmulator::~BlockEmulator() { delete fibers_; }

void BlockEmulator::run(unsigned bx, unsigned by, unsigned bz, int smem_bytes,
                        const std::function<void(float*)>& body) {
  const size_t n = static_cast<size_t>(smem_bytes + 3) / 4;
  smem_.assign(n + kGuardFloats, NAN);
  for (size_t i = n; i < smem_.size(); ++i) std::memcpy(&smem_[i], &kGuardBits, 4);

  Scheduler& s = *fibers_;
  g_sched = &s;
  s.body = &body;
  s.smem = smem_.data();
  s.live = kBlockThreads;
  s.block_gate = Gate{};
  for (WarpSlots& w : s.warps) w.gate = Gate{};
  for (int t = 0; t < kBlockThreads; ++t) {
    s.done[t] = false;
    s.places[t] = ThreadPlace{dim3{static_cast<unsigned>(t), 0, 0}, dim3{bx, by, bz},
                              dim3{static_cast<unsigned>(kBlockThreads), 1, 1}};
    s.waiting_on[t] = nullptr;
    fiber_start(s.ctx[t], s.stacks.get() + kStackBytes * static_cast<size_t>(t), kStackBytes, fiber_main);
  }
  while (s.live > 0) {
    const uint64_t before = s.progress;
    for (int t = 0; t < kBlockThreads; ++t) {
      if (s.done[t] || (s.waiting_on[t] && s.waiting_on[t]->generation == s.waiting_generation[t])) continue;
      s.current = t;
      g_place = &s.places[t];
      fiber_switch(s.main_ctx, s.ctx[t]);
    }
    if (s.progress == before) {
      std::fprintf(stderr, "block emulator: block (%u, %u, %u) deadlocked: %d threads wait at a barrier "
                           "that can never open (a divergent __syncthreads or warp collective)\n", bx, by, bz, s.live);
      std::abort();
    }
  }
  g_place = nullptr;
  for (size_t i = n; i < smem_.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &smem_[i], 4);
    hw::check(bits == kGuardBits, "block emulator: block (" + std::to_string(bx) + ", " + std::to_string(by) + ", " +
                                      std::to_string(bz) + ") wrote shared memory float " + std::to_string(i) +
                                      " past the " + std::to_string(smem_bytes) + " bytes the launch requests");
  }
}

}  // namespace hw_emu
