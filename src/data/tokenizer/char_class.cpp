// Class lookup (an ASCII/BMP table built once from the generated ranges, binary search above
// the BMP) and UTF-8 decoding.
#include <algorithm>
#include <vector>

#include "data/tokenizer/unicode_ranges.hpp"

namespace hw::data::unicode {

namespace {

bool in_ranges(const CodeRange* r, size_t n, uint32_t cp) {
  const CodeRange* end = r + n;
  const CodeRange* it = std::upper_bound(r, end, cp, [](uint32_t c, const CodeRange& x) { return c < x.first; });
  return it != r && (it - 1)->last >= cp;
}

CharClass classify_slow(uint32_t cp) {
  if (in_ranges(kLetterRanges, kLetterRanges_size, cp)) return CharClass::Letter;
  if (in_ranges(kNumberRanges, kNumberRanges_size, cp)) return CharClass::Number;
  if (in_ranges(kSpaceRanges, kSpaceRanges_size, cp)) return CharClass::Space;
  return CharClass::Other;
}

const std::vector<CharClass>& bmp_table() {
  static const std::vector<CharClass> table = [] {
    std::vector<CharClass> t(0x10000);
    for (uint32_t cp = 0; cp < 0x10000; ++cp) t[cp] = classify_slow(cp);
    return t;
  }();
  return table;
}

}  // namespace

CharClass classify(uint32_t cp) {
  if (cp < 0x10000) return bmp_table()[cp];
  if (cp > 0x10FFFF) return CharClass::Other;
  return classify_slow(cp);
}

Char decode_char(std::string_view s, size_t pos) {
  const auto b0 = static_cast<unsigned char>(s[pos]);
  if (b0 < 0x80) {
    static const std::vector<CharClass>& t = bmp_table();
    return {b0, 1, t[b0]};
  }
  const Char invalid{0x110000u + b0, 1, CharClass::Other};
  int len = 0;
  uint32_t cp = 0, min = 0;
  if (b0 >= 0xC2 && b0 <= 0xDF) len = 2, cp = b0 & 0x1F, min = 0x80;
  else if (b0 >= 0xE0 && b0 <= 0xEF) len = 3, cp = b0 & 0x0F, min = 0x800;
  else if (b0 >= 0xF0 && b0 <= 0xF4) len = 4, cp = b0 & 0x07, min = 0x10000;
  else return invalid;
  if (pos + size_t(len) > s.size()) return invalid;
  for (int k = 1; k < len; ++k) {
    const auto b = static_cast<unsigned char>(s[pos + size_t(k)]);
    if ((b & 0xC0) != 0x80) return invalid;
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return invalid;
  return {cp, uint8_t(len), classify(cp)};
}

size_t complete_utf8_prefix(std::string_view s) {
  // Only the last 3 bytes can be the start of an unfinished sequence.
  const size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    const auto b = static_cast<unsigned char>(s[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    int need = 0;
    if (b >= 0xC2 && b <= 0xDF) need = 2;
    else if (b >= 0xE0 && b <= 0xEF) need = 3;
    else if (b >= 0xF0 && b <= 0xF4) need = 4;
    if (need > int(back)) {
      // Unfinished: hold it back if the bytes so far can still become a valid sequence.
      std::string_view tail = s.substr(n - back);
      bool ok = true;
      for (size_t k = 1; k < tail.size(); ++k) ok = ok && (static_cast<unsigned char>(tail[k]) & 0xC0) == 0x80;
      if (ok && tail.size() >= 2) {
        const auto b1 = static_cast<unsigned char>(tail[1]);
        if (b == 0xE0 && b1 < 0xA0) ok = false;  // overlong
        if (b == 0xED && b1 > 0x9F) ok = false;  // surrogate
        if (b == 0xF0 && b1 < 0x90) ok = false;  // overlong
        if (b == 0xF4 && b1 > 0x8F) ok = false;  // above U+10FFFF
      }
      return ok ? n - back : n;
    }
    return n;
  }
  return n;
}

}  // namespace hw::data::unicode
