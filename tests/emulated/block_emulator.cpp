// The block emulator (block_emulator.hpp): fibers with their own stacks, a round-robin
// scheduler, and gates (barriers); the scheduler resumes a waiting fiber only once its gate
// has opened. A round in which no fiber can run and no gate opens is a deadlock.
#include "emulated/block_emulator.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "emulated/fiber_switch.hpp"
#include "headwise/core/error.hpp"
#include "kernels/mma_emulation.hpp"

namespace hw_emu {
namespace {

constexpr int kMaxWarps = kMaxBlockThreads / 32;
constexpr int kGuardFloats = 1024;
constexpr uint32_t kGuardBits = 0x7fc0dead;  // a NaN payload no kernel writes
constexpr size_t kStackBytes = 256 * 1024;   // virtual; the kernels' frames take a few KiB

// A barrier of `members` fibers: the last to arrive opens it (bumps the generation).
struct Gate {
  int arrived = 0;
  unsigned generation = 0;
};

struct WarpSlots {
  Gate gate;
  int members = 32;
  uint32_t a[32][4] = {};
  uint32_t b[32][2] = {};
  float c[32][4] = {};
  uint64_t v[32] = {};
};

// One thread's cp.async copies: the open group and the committed ones, oldest first.
struct AsyncCopy {
  void* dst = nullptr;
  const void* src = nullptr;
  bool valid = false;
};
struct AsyncCopies {
  std::vector<AsyncCopy> open;
  std::vector<std::vector<AsyncCopy>> committed;
};

struct Emulator {
  FiberContext main_ctx;
  FiberContext ctx[kMaxBlockThreads];
  const Gate* waiting_on[kMaxBlockThreads] = {};  // the gate a fiber waits at (null: runnable)
  unsigned waiting_generation[kMaxBlockThreads] = {};
  bool done[kMaxBlockThreads] = {};
  ThreadPlace places[kMaxBlockThreads];
  std::unique_ptr<char[]> stacks{new char[kStackBytes * kMaxBlockThreads]};
  int threads = 0, current = 0, live = 0;
  uint64_t progress = 0;  // gates opened + fibers finished
  Gate block_gate;
  WarpSlots warps[kMaxWarps];
  const std::function<void()>* body = nullptr;
  std::vector<float> smem;
  std::vector<AsyncCopies> async{std::vector<AsyncCopies>(kMaxBlockThreads)};
  bool reverse_order = false;  // run a block's fibers from the highest thread index down
  uint64_t blocks_run = 0;     // seeds each block's fiber order
  std::vector<int> order;      // the running block's fiber order
};

// splitmix64: a fixed pseudo-random sequence (a test's fiber orders are the same on every run).
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

Emulator& emulator() {
  static Emulator e;
  return e;
}

void yield_to_scheduler() {
  Emulator& e = emulator();
  fiber_switch(e.ctx[e.current], e.main_ctx);
}

void open_gate(Gate& g) {
  g.arrived = 0;
  ++g.generation;
  ++emulator().progress;
}

void wait_at(Gate& g, int members) {
  const unsigned mine = g.generation;
  if (++g.arrived == members) {
    open_gate(g);
    return;
  }
  Emulator& e = emulator();
  e.waiting_on[e.current] = &g;
  e.waiting_generation[e.current] = mine;
  while (g.generation == mine) yield_to_scheduler();
  e.waiting_on[e.current] = nullptr;
}

[[noreturn]] void fiber_main() {
  Emulator& e = emulator();
  const int me = e.current;
  (*e.body)();
  // An exited thread stops counting for __syncthreads: the others may now be complete.
  e.done[me] = true;
  --e.live;
  ++e.progress;
  if (e.block_gate.arrived > 0 && e.block_gate.arrived == e.live) open_gate(e.block_gate);
  fiber_switch(e.ctx[me], e.main_ctx);  // never resumed
  std::abort();
}

WarpSlots& my_warp() { return emulator().warps[emulator().current / 32]; }
int my_lane() { return emulator().current % 32; }

template <class Emulate>
void warp_mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], Emulate emulate) {
  WarpSlots& w = my_warp();
  const int l = my_lane();
  std::copy(a, a + 4, w.a[l]);
  std::copy(b, b + 2, w.b[l]);
  std::copy(d, d + 4, w.c[l]);
  wait_at(w.gate, w.members);
  if (l == 0) emulate(w.a, w.b, w.c);
  wait_at(w.gate, w.members);
  std::copy(w.c[l], w.c[l] + 4, d);
}

template <class Read>
uint64_t warp_exchange(uint64_t v, Read read) {
  WarpSlots& w = my_warp();
  const int l = my_lane();
  w.v[l] = v;
  wait_at(w.gate, w.members);
  const uint64_t r = read(w, l);
  wait_at(w.gate, w.members);
  return r;
}

void run_block(dim3 block_idx, dim3 grid, dim3 block, size_t smem_bytes) {
  Emulator& e = emulator();
  const size_t n = (smem_bytes + 3) / 4;
  e.smem.assign(n + kGuardFloats, NAN);
  for (size_t i = n; i < e.smem.size(); ++i) std::memcpy(&e.smem[i], &kGuardBits, 4);
  e.live = e.threads;
  e.block_gate = Gate{};
  for (int w = 0; w < (e.threads + 31) / 32; ++w) {
    e.warps[w].gate = Gate{};
    e.warps[w].members = std::min(32, e.threads - 32 * w);
  }
  for (int t = 0; t < e.threads; ++t) {
    e.async[t] = AsyncCopies{};
    e.done[t] = false;
    e.waiting_on[t] = nullptr;
    const unsigned ut = static_cast<unsigned>(t);
    e.places[t] = ThreadPlace{dim3(ut % block.x, ut / block.x % block.y, ut / (block.x * block.y)), block_idx, block,
                              grid};
    fiber_start(e.ctx[t], e.stacks.get() + kStackBytes * static_cast<size_t>(t), kStackBytes, fiber_main);
  }
  // The order fibers take turns in: a fresh shuffle per block (so a rerun of a launch sees other
  // orders, and a result that depends on the order, i.e. a missing barrier, changes bits), or
  // strictly reversed under ReverseThreadOrder.
  e.order.resize(static_cast<size_t>(e.threads));
  for (int i = 0; i < e.threads; ++i) e.order[size_t(i)] = e.reverse_order ? e.threads - 1 - i : i;
  if (!e.reverse_order) {
    uint64_t r = mix64(++e.blocks_run);
    for (int i = e.threads - 1; i > 0; --i) {
      r = mix64(r);
      std::swap(e.order[size_t(i)], e.order[size_t(r % uint64_t(i + 1))]);
    }
  }
  while (e.live > 0) {
    const uint64_t before = e.progress;
    for (int i = 0; i < e.threads; ++i) {
      const int t = e.order[size_t(i)];
      if (e.done[t] || (e.waiting_on[t] && e.waiting_on[t]->generation == e.waiting_generation[t])) continue;
      e.current = t;
      g_place = &e.places[t];
      fiber_switch(e.main_ctx, e.ctx[t]);
    }
    if (e.progress == before) {
      std::fprintf(stderr, "block emulator: block (%u, %u, %u) deadlocked: %d threads wait at a barrier "
                           "that can never open (a divergent __syncthreads or warp collective)\n",
                   block_idx.x, block_idx.y, block_idx.z, e.live);
      std::abort();
    }
  }
  g_place = nullptr;
  for (int t = 0; t < e.threads; ++t)
    hw::check(e.async[t].open.empty() && e.async[t].committed.empty(),
              "block emulator: thread " + std::to_string(t) + " of block (" + std::to_string(block_idx.x) +
                  ") ended with cp.async copies it never waited for");
  for (size_t i = n; i < e.smem.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, &e.smem[i], 4);
    hw::check(bits == kGuardBits, "block emulator: block (" + std::to_string(block_idx.x) + ", " +
                                      std::to_string(block_idx.y) + ", " + std::to_string(block_idx.z) +
                                      ") wrote shared memory float " + std::to_string(i) + " past the " +
                                      std::to_string(smem_bytes) + " bytes the launch requests");
  }
}

}  // namespace

ReverseThreadOrder::ReverseThreadOrder() { emulator().reverse_order = true; }
ReverseThreadOrder::~ReverseThreadOrder() { emulator().reverse_order = false; }

void sync_block() { wait_at(emulator().block_gate, emulator().live); }

uint64_t shfl_xor_bits(uint64_t v, int lane_mask) {
  return warp_exchange(v, [lane_mask](const WarpSlots& w, int l) { return w.v[(l ^ lane_mask) & 31]; });
}
uint64_t shfl_bits(uint64_t v, int src_lane) {
  return warp_exchange(v, [src_lane](const WarpSlots& w, int) { return w.v[src_lane & 31]; });
}
unsigned ballot(bool pred) {
  return static_cast<unsigned>(warp_exchange(pred ? 1u : 0u, [](const WarpSlots& w, int) {
    unsigned bits = 0;
    for (int l = 0; l < w.members; ++l) bits |= static_cast<unsigned>(w.v[l] & 1u) << l;
    return uint64_t(bits);
  }));
}

void warp_mma_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  warp_mma(d, a, b, [](auto& A, auto& B, auto& C) { hw_test_mma::emulate_mma(A, B, C); });
}
void warp_mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  warp_mma(d, a, b, [](auto& A, auto& B, auto& C) { hw_test_mma::emulate_mma_tf32(A, B, C); });
}

namespace {
// Whether [p, p + bytes) lies in the bytes the running launch asked for.
bool in_block_smem(const void* p, size_t bytes) {
  const Emulator& e = emulator();
  const auto* begin = reinterpret_cast<const char*>(e.smem.data());
  const auto* end = begin + (e.smem.size() - kGuardFloats) * sizeof(float);
  const auto* c = static_cast<const char*>(p);
  return c >= begin && c + bytes <= end;
}
}  // namespace

void warp_ldmatrix(uint32_t (&r)[4], const uint32_t* row, bool trans) {
  const bool inside = in_block_smem(row, 16);
  if (!inside || !hw_test_mma::ldmatrix_row_aligned(row)) {
    std::fprintf(stderr, "block emulator: ldmatrix row address of thread %d is %s\n", emulator().current,
                 !inside ? "outside the block's shared memory" : "not 16-byte aligned");
    std::abort();
  }
  warp_exchange(reinterpret_cast<uint64_t>(row), [&r, trans](const WarpSlots& w, int l) {
    const uint32_t* rows[32];
    for (int i = 0; i < 32; ++i) rows[i] = reinterpret_cast<const uint32_t*>(w.v[i]);
    hw_test_mma::emulate_ldmatrix(rows, l, trans, r);
    return uint64_t(0);
  });
}

void async_copy16(void* dst, const void* src, bool valid) {
  Emulator& e = emulator();
  const bool dst_ok = in_block_smem(dst, 16) && reinterpret_cast<uintptr_t>(dst) % 16 == 0;
  const bool src_ok = !valid || reinterpret_cast<uintptr_t>(src) % 16 == 0;
  if (!dst_ok || !src_ok) {
    std::fprintf(stderr, "block emulator: cp.async of thread %d: %s\n", e.current,
                 !dst_ok ? "destination outside the block's shared memory or not 16-byte aligned"
                         : "source not 16-byte aligned");
    std::abort();
  }
  std::memset(dst, 0xff, 16);  // in flight: NaN until the wait
  e.async[e.current].open.push_back({dst, src, valid});
}

void async_commit() {
  AsyncCopies& a = emulator().async[emulator().current];
  a.committed.push_back(std::move(a.open));
  a.open.clear();
}

void async_wait(int pending) {
  AsyncCopies& a = emulator().async[emulator().current];
  while (static_cast<int>(a.committed.size()) > pending) {
    for (const AsyncCopy& c : a.committed.front()) {
      if (c.valid) std::memcpy(c.dst, c.src, 16);
      else std::memset(c.dst, 0, 16);
    }
    a.committed.erase(a.committed.begin());
  }
}

float* block_smem() { return emulator().smem.data(); }

void launch_grid(dim3 grid, dim3 block, size_t smem_bytes, const std::function<void()>& body) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  hw::check(threads >= 1 && threads <= kMaxBlockThreads,
            "block emulator: a block of " + std::to_string(threads) + " threads (1..1024 allowed)");
  hw::check(uint64_t(grid.x) * grid.y * grid.z >= 1, "block emulator: an empty grid");
  Emulator& e = emulator();
  hw::check(e.body == nullptr, "block emulator: a launch from inside a kernel");
  e.threads = static_cast<int>(threads);
  e.body = &body;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        try {
          run_block(dim3(x, y, z), grid, block, smem_bytes);
        } catch (...) {
          e.body = nullptr;
          throw;
        }
      }
  e.body = nullptr;
}

}  // namespace hw_emu
