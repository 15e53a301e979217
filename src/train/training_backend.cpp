#include "headwise/train/training_backend.hpp"

#include "headwise/core/device_memory.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/kernels/cuda_backend.hpp"

namespace hw {

TrainingBackend::TrainingBackend(const std::string& device, bool tf32, int local_rank, const std::string& option) {
  if (device == "cpu") {
    ops_ = &cpu_backend<float>();
    description_ = "cpu";
    return;
  }
  check(device == "cuda", option + " must be \"cpu\" or \"cuda\", got \"" + text_brief(device) + "\"");
  // Asked before anything touches CUDA, so a CPU-only build or a machine without a GPU gives
  // one line that says which.
  check(device::available(), option + " = \"cuda\": " + device::describe());
  check(local_rank >= 0, option + " = \"cuda\": negative local rank " + std::to_string(local_rank));
  device::select(local_rank % device::count());
  // A backend of its own on the GPU just selected (stream, cuBLASLt handle, scratch), owned
  // here so its lifetime is the run's.
  CudaBackendOptions opts;
  opts.tf32 = tf32;
  owned_ = make_cuda_backend(opts);
  ops_ = owned_.get();
  description_ = "cuda: " + device::describe();
}

TrainingBackend::~TrainingBackend() = default;

}  // namespace hw
