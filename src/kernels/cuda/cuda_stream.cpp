// Owned CUDA streams and events. Destructors ignore errors: they may run at process exit,
// after the CUDA runtime has already been torn down.
#include "kernels/cuda/cuda_stream.hpp"

#include "kernels/cuda/cuda_check.hpp"

namespace hw::cuda {

Stream::Stream() { HW_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }

Stream::~Stream() {
  if (stream_) (void)cudaStreamDestroy(stream_);
}

void Stream::synchronize() const { HW_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

Event::Event() { HW_CUDA_CHECK(cudaEventCreate(&event_)); }

Event::~Event() {
  if (event_) (void)cudaEventDestroy(event_);
}

void Event::record(cudaStream_t stream) const { HW_CUDA_CHECK(cudaEventRecord(event_, stream)); }

void Event::synchronize() const { HW_CUDA_CHECK(cudaEventSynchronize(event_)); }

float Event::elapsed_ms_since(const Event& start) const {
  float ms = 0.0f;
  HW_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

cudaStream_t cuda_stream_of(const Backend<float>& backend) {
  const auto* owner = dynamic_cast<const StreamOwner*>(&backend);
  return owner ? owner->stream() : nullptr;
}

}  // namespace hw::cuda
