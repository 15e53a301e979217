// Device memory in a build without CUDA: nothing is available, and asking for it is an error
// that says how to get it.
#include "headwise/core/device_memory.hpp"

#include "headwise/core/error.hpp"

namespace hw::device {

namespace {
[[noreturn]] void missing(const std::string& what) {
  fail(what + ": this headwise was built without CUDA (configure with -DHEADWISE_CUDA=ON and nvcc on the PATH)");
}
}  // namespace

bool available() { return false; }
int count() { return 0; }
std::string describe() { return "no GPU: headwise was built without CUDA"; }
void select(int index) { missing("select GPU " + std::to_string(index)); }
void* alloc(size_t, const std::string& what) { missing(what); }
void free(void*) noexcept {}
void zero(void*, size_t) { missing("device memset"); }
void copy_to_device(void*, const void*, size_t) { missing("copy to the GPU"); }
void copy_to_host(void*, const void*, size_t) { missing("copy from the GPU"); }

}  // namespace hw::device
