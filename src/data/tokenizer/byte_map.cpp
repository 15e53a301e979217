#include "data/tokenizer/byte_map.hpp"

namespace hw::data {

namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) s += char(cp);
  else {  // all code points here are below 0x800
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

}  // namespace

const ByteMap& byte_map() {
  static const ByteMap map = [] {
    ByteMap m;
    m.from_cp.fill(-1);
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      m.to_cp[b] = printable ? b : next++;
      m.to_utf8[b] = utf8(m.to_cp[b]);
      m.from_cp[m.to_cp[b]] = int16_t(b);
    }
    return m;
  }();
  return map;
}

}  // namespace hw::data
