// Fuzz target: safetensors files (8-byte header length, JSON header, data), as a checkpoint's
// model.safetensors reaches SafetensorsReader; every tensor the reader accepts is read back.
#include <vector>

#include "fuzz_util.hpp"
#include "headwise/io/safetensors.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = hw::fuzz::scratch_path("safetensors");
  hw::fuzz::write_scratch(path, data, size);
  hw::fuzz::expect_only_errors([&] {
    hw::io::SafetensorsReader st(path);
    for (const auto& name : st.names()) {
      const auto& info = st.info(name);
      std::vector<uint8_t> buf(info.nbytes);  // within the file: the reader checked the offsets
      st.read(name, info.dtype, info.shape, buf.data());
    }
  });
  return 0;
}
