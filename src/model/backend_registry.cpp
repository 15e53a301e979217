// Which backend trains on which device.
#include "headwise/core/error.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/kernels/cuda_backend.hpp"

namespace hw {

const Backend<float>& backend_for(Device device) {
  switch (device) {
    case Device::CPU:
      return cpu_backend<float>();
    case Device::CUDA:
      return cuda_backend();
  }
  fail("unknown device");
}

}  // namespace hw
