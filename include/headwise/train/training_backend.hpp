#pragma once
// The backend a run computes on, chosen by train.device: the CPU reference backend, or a CUDA
// backend on this process's GPU. Shared by train, bench and eval so all three accept the same
// device option and fail the same way when it cannot be had.
#include <memory>
#include <string>

#include "headwise/kernels/backend.hpp"

namespace hw {

class TrainingBackend {
 public:
  // device: "cpu" or "cuda". For "cuda" GPU local_rank % (visible GPUs) becomes this thread's
  // current GPU first (several ranks per node share the node's GPUs round robin); tf32 picks
  // the GEMM precision. Throws hw::Error with one line naming `option` (the key or flag the
  // device came from) and the reason when there is no usable GPU or this build has no CUDA.
  TrainingBackend(const std::string& device, bool tf32, int local_rank, const std::string& option = "train.device");
  ~TrainingBackend();
  TrainingBackend(const TrainingBackend&) = delete;
  TrainingBackend& operator=(const TrainingBackend&) = delete;

  const Backend<float>& ops() const { return *ops_; }
  Device device() const { return ops_->device(); }
  // One line for the log: "cpu", or the GPU's name and memory.
  const std::string& describe() const { return description_; }

 private:
  std::unique_ptr<Backend<float>> owned_;  // the CUDA backend, when this object created it
  const Backend<float>* ops_ = nullptr;
  std::string description_;
};

}  // namespace hw
