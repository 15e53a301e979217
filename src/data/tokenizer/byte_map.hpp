#pragma once
// GPT-2's byte-to-unicode map: every byte is shown as one printable character, so a token of a
// byte-level vocabulary is a string of such characters. Bytes 0x21-0x7E, 0xA1-0xAC and
// 0xAE-0xFF map to themselves; the other 68 take U+0100, U+0101, ... in byte order.
#include <array>
#include <cstdint>
#include <string>

namespace hw::data {

struct ByteMap {
  std::array<uint32_t, 256> to_cp{};         // byte -> code point
  std::array<std::string, 256> to_utf8{};    // byte -> that code point as UTF-8
  // code point -> byte, for code points below 0x144 (the largest used); -1 when none maps.
  std::array<int16_t, 0x144> from_cp{};
};
const ByteMap& byte_map();

}  // namespace hw::data
