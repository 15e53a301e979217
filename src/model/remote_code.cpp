// The Python model files of mixed-plan checkpoints (remote_code.hpp), from the bytes CMake
// embedded (generated/headwise_hf_py.hpp).
#include "headwise/model/remote_code.hpp"

#include <filesystem>

#include "headwise/io/files.hpp"
#include "headwise_hf_py.hpp"

namespace hw {

namespace {
template <size_t N>
std::string text_of(const unsigned char (&bytes)[N]) {
  return std::string(reinterpret_cast<const char*>(bytes), N);
}
}  // namespace

void write_remote_code(const std::string& dir) {
  io::write_file_atomic(dir + "/" + kRemoteConfigFile, text_of(k_configuration_headwise_py));
  io::write_file_atomic(dir + "/" + kRemoteModelFile, text_of(k_modeling_headwise_py));
}

void remove_remote_code(const std::string& dir) {
  std::filesystem::remove(dir + "/" + kRemoteConfigFile);
  std::filesystem::remove(dir + "/" + kRemoteModelFile);
}

}  // namespace hw
