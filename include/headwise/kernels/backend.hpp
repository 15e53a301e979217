#pragma once
// The op interface the model, optimizer and methods are written against. A backend owns no
// state the model needs; pointers are in the backend's device memory. The CPU backend is
// the numerical reference (float for training, double for tests); a CUDA backend implements
// the same interface and is parity-tested op by op against it. Semantics of every op are
// documented in kernels/cpu.hpp and attention/attention.hpp. The step's ops are declared in
// kernels/compute_ops.hpp (a Backend<F> computes them in F); a Backend may also offer them
// with bf16 storage (bf16_ops) for mixed-precision steps.
#include <cstddef>
#include <cstdint>

#include "headwise/attention/attention.hpp"
#include "headwise/core/bf16.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/tensor.hpp"
#include "headwise/kernels/adamw_step.hpp"
#include "headwise/kernels/compute_ops.hpp"

namespace hw {

template <class F>
class Backend : public ComputeOps<F, F> {
 public:
  virtual Device device() const = 0;
  virtual const char* name() const = 0;

  // The step's ops with bf16 activations and weight copies and F gradients and statistics
  // (mixed precision, train.precision = "bf16"), sharing this backend's device and stream; or
  // nullptr when this backend has none. Memory ops (copies, synchronize) stay on the Backend.
  virtual const ComputeOps<bf16, F>* bf16_ops() const { return nullptr; }

  // Ops on gradients and optimizer state (always F).
  virtual double sum_squares(const F* x, int64_t n) const = 0;
  virtual void scale(F* x, F s, int64_t n) const = 0;
  // n consecutive elements of one AdamW update (parameters, gradients and moments share n).
  virtual void adamw_update(F* p, const F* g, F* m, F* v, int64_t n, const AdamWStep& s) const = 0;

  // Memory of this backend's device <-> host memory. Both return when the copy is complete
  // (the CPU backend: memcpy). Used outside the step: init, checkpoints, plan changes, and
  // the few scalars a step reads back.
  virtual void copy_to_device(void* dst, const void* host_src, size_t bytes) const = 0;
  virtual void copy_to_host(void* host_dst, const void* src, size_t bytes) const = 0;
  // Wait until every op issued so far has finished (the CPU backend is synchronous).
  virtual void synchronize() const {}
  // The CUDA stream (cudaStream_t) every op is enqueued on, or nullptr for a synchronous
  // backend: a GPU communicator orders its collectives after this stream's work (Comm::bind_stream).
  virtual void* native_stream() const { return nullptr; }
  // Named phase markers for profilers (NVTX on CUDA); ranges nest. No-ops on the CPU.
  virtual void range_push(const char* /*name*/) const {}
  virtual void range_pop() const {}

  // A full-precision step uses the parameters themselves: there is no copy to round.
  void round_weights(F* /*dst*/, const F* /*src*/, int64_t /*n*/) const override {
    fail("internal: round_weights called on a full-precision backend");
  }
};

// The CPU reference backend (a process-wide stateless object).
template <class F>
const Backend<F>& cpu_backend();

// The training backend for a device: the CPU backend, or the CUDA backend of this process's
// current GPU. Throws hw::Error naming the reason when CUDA was not built or no GPU is visible.
const Backend<float>& backend_for(Device device);

}  // namespace hw
