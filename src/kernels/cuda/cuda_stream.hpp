#pragma once
// Runtime pieces the CUDA backend is built from: an owned stream, an owned event, and the
// link from a Backend to the stream its ops run on (so the NCCL communicator can order its
// collectives after the backend's work without knowing the backend's class).
#include <cuda_runtime.h>

#include "headwise/kernels/backend.hpp"

namespace hw::cuda {

// A non-blocking stream (it does not synchronise with the legacy default stream), created on
// the current GPU and destroyed with its owner.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// A timing event (cudaEventDefault), for measuring GPU time between two records.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) const;
  void synchronize() const;
  // Milliseconds from `start` to this event (both recorded and complete).
  float elapsed_ms_since(const Event& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

// Implemented by backends whose ops run on one CUDA stream.
class StreamOwner {
 public:
  virtual ~StreamOwner() = default;
  virtual cudaStream_t stream() const = 0;
};

// The stream every op of `backend` is enqueued on, or nullptr when it is not a CUDA backend.
cudaStream_t cuda_stream_of(const Backend<float>& backend);

}  // namespace hw::cuda
