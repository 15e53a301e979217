#pragma once
// Switching between the block emulator's fibers. On x86-64 a six-register stack switch (the
// System V callee-saved registers; the kernels never change MXCSR or the x87 control word):
// a few nanoseconds, where ucontext's swapcontext makes a signal-mask system call per switch
// and the emulator switches hundreds of times per barrier. Elsewhere, ucontext.
#include <cstddef>
#include <cstdint>

#if defined(__x86_64__)

extern "C" void hw_emu_fiber_switch(void** save_sp, void* load_sp);

namespace hw_emu {

struct FiberContext {
  void* sp = nullptr;
};

// Saves the running context in `from` and resumes `to`.
inline void fiber_switch(FiberContext& from, FiberContext& to) { hw_emu_fiber_switch(&from.sp, to.sp); }

// Prepares `ctx` to start `entry` (which must never return) on the given stack: the first
// switch to it pops six zero registers and "returns" into entry with the stack aligned as
// after a call.
inline void fiber_start(FiberContext& ctx, char* stack, size_t bytes, void (*entry)()) {
  auto top = reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t(15);
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;                              // entry's would-be return address (never used)
  *--sp = reinterpret_cast<void*>(entry);       // at a 16-byte boundary: rsp = 8 mod 16 in entry
  for (int r = 0; r < 6; ++r) *--sp = nullptr;  // rbp, rbx, r12-r15
  ctx.sp = sp;
}

}  // namespace hw_emu

#else

#include <ucontext.h>

namespace hw_emu {

struct FiberContext {
  ucontext_t uc;
};
inline void fiber_switch(FiberContext& from, FiberContext& to) { swapcontext(&from.uc, &to.uc); }
inline void fiber_start(FiberContext& ctx, char* stack, size_t bytes, void (*entry)()) {
  getcontext(&ctx.uc);
  ctx.uc.uc_stack.ss_sp = stack;
  ctx.uc.uc_stack.ss_size = bytes;
  ctx.uc.uc_link = nullptr;
  makecontext(&ctx.uc, entry, 0);
}

}  // namespace hw_emu

#endif
