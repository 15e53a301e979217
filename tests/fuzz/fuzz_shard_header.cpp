// Fuzz target: token shards (llm.c format: 256 int32 header, uint16 tokens), as the loader
// reads them: the header check on the bytes, then the whole file through read_shard.
#include <cstring>

#include "fuzz_util.hpp"
#include "headwise/data/shards.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 1024) {
    int32_t header[256];
    std::memcpy(header, data, sizeof header);
    hw::fuzz::expect_only_errors([&] { (void)hw::data::shard_header_tokens(header, size, "fuzz"); });
  }
  const std::string& path = hw::fuzz::scratch_path("shard");
  hw::fuzz::write_scratch(path, data, size);
  hw::fuzz::expect_only_errors([&] { (void)hw::data::read_shard(path); });
  return 0;
}
