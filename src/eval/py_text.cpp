// Python string semantics on UTF-8 (py_text.hpp). Decoding follows Python's reading of the bytes
// a JSON parser already checked: well-formed UTF-8; a stray byte is one code point of its own.
#include "headwise/eval/py_text.hpp"

#include <vector>

namespace hw::eval {

namespace {

// Length in bytes of the UTF-8 sequence starting at s[i] (1 for a stray byte).
size_t utf8_step(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  const size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k)
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  return n;
}

uint32_t utf8_decode(std::string_view s, size_t i, size_t n) {
  const auto b = static_cast<unsigned char>(s[i]);
  if (n == 1) return b < 0x80 ? b : 0xDC00u + b;  // a stray byte: Python's surrogateescape value
  uint32_t cp = b & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

void utf8_append(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

// Pairs where the upper case is the even code point and the lower the odd one following it.
bool in_even_odd_pairs(uint32_t cp) {
  return (cp >= 0x100 && cp <= 0x12F) || (cp >= 0x132 && cp <= 0x137) || (cp >= 0x14A && cp <= 0x177) ||
         (cp >= 0x460 && cp <= 0x481) || (cp >= 0x48A && cp <= 0x4BF);
}
// Pairs where the upper case is odd and the lower the even one following it.
bool in_odd_even_pairs(uint32_t cp) { return (cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E); }

uint32_t to_upper(uint32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c == 0xB5) return 0x39C;
  if (c == 0x131) return 'I';
  if (c == 0x17F) return 'S';
  if (in_even_odd_pairs(c)) return c & ~1u;
  if (in_odd_even_pairs(c)) return (c & 1u) ? c : c - 1;
  if (c >= 0x3B1 && c <= 0x3C9) return c == 0x3C2 ? 0x3A3 : c - 32;
  if (c == 0x3AC) return 0x386;
  if (c >= 0x3AD && c <= 0x3AF) return c - 37;
  if (c == 0x3CC) return 0x38C;
  if (c == 0x3CD || c == 0x3CE) return c - 63;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  return c;
}

uint32_t to_lower(uint32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c == 0x178) return 0xFF;
  if (in_even_odd_pairs(c)) return c | 1u;
  if (in_odd_even_pairs(c)) return (c & 1u) ? c + 1 : c;
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 32;
  if (c == 0x386) return 0x3AC;
  if (c >= 0x388 && c <= 0x38A) return c + 37;
  if (c == 0x38C) return 0x3CC;
  if (c == 0x38E || c == 0x38F) return c + 63;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  return c;
}

}  // namespace

int64_t py_len(std::string_view s) {
  int64_t n = 0;
  for (size_t i = 0; i < s.size(); i += utf8_step(s, i)) ++n;
  return n;
}

bool py_isspace(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::string py_strip(std::string_view s) {
  size_t begin = 0, end = 0;  // [begin, end): from the first to past the last non-space code point
  bool seen = false;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_step(s, i);
    if (!py_isspace(utf8_decode(s, i, n))) {
      if (!seen) begin = i;
      seen = true;
      end = i + n;
    }
    i += n;
  }
  return seen ? std::string(s.substr(begin, end - begin)) : std::string();
}

std::string py_rstrip(std::string_view s) {
  size_t end = 0;  // past the last non-space code point
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_step(s, i);
    if (!py_isspace(utf8_decode(s, i, n))) end = i + n;
    i += n;
  }
  return std::string(s.substr(0, end));
}

std::string py_replace(std::string_view s, std::string_view from, std::string_view to) {
  std::string out;
  size_t i = 0;
  while (true) {
    const size_t j = s.find(from, i);
    if (j == std::string_view::npos) break;
    out.append(s.substr(i, j - i));
    out.append(to);
    i = j + from.size();
  }
  out.append(s.substr(i));
  return out;
}

std::string py_capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_step(s, i);
    if (n == 1 && static_cast<unsigned char>(s[i]) >= 0x80) {
      out += s[i];  // a stray byte stays as it is (no case)
    } else {
      const uint32_t cp = utf8_decode(s, i, n);
      utf8_append(i == 0 ? to_upper(cp) : to_lower(cp), out);
    }
    i += n;
  }
  return out;
}

std::string remove_bracketed(std::string_view s) {
  // Python's re scans left to right; at a '[' the lazy .*? takes the nearest ']' on the same
  // line; without one the match fails there and the '[' is kept.
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '[') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != ']' && s[j] != '\n') ++j;
      if (j < s.size() && s[j] == ']') {
        i = j + 1;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

int64_t py_split_whitespace_count(std::string_view s) {
  int64_t pieces = 1;
  bool in_space = false;
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_step(s, i);
    const bool space = py_isspace(utf8_decode(s, i, n));
    if (space && !in_space) ++pieces;
    in_space = space;
    i += n;
  }
  return pieces;
}

}  // namespace hw::eval
