#pragma once
// Scratch directories and byte-level file helpers for the safetensors tests.
#include <cstdint>
#include <fstream>
#include <string>

#include "support/temp_dir.hpp"

namespace hw::test {

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// An 8-byte little-endian length followed by the header text, as the format defines it.
inline std::string le64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[static_cast<size_t>(i)] = static_cast<char>((v >> (8 * i)) & 0xff);
  return s;
}

}  // namespace hw::test
