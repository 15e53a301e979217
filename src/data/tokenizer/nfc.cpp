// NFC as UAX #15 defines it, on the generated tables (nfc_tables.cpp).
#include "data/tokenizer/nfc.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "data/tokenizer/nfc_tables.hpp"
#include "data/tokenizer/unicode_ranges.hpp"

namespace hw::data {

namespace {

// Hangul syllables (Unicode ch. 3.12): S = SBase + (L * VCount + V) * TCount + T.
constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
                   kSCount = kLCount * kNCount;
constexpr uint32_t kInvalid = 0x110000;  // decode_char's code of a stray byte: 0x110000 + byte

uint8_t ccc(uint32_t cp) {
  const nfc_data::CombiningRange* b = nfc_data::kCombiningClasses;
  const nfc_data::CombiningRange* e = b + nfc_data::kCombiningClasses_size;
  const auto* it = std::upper_bound(b, e, cp, [](uint32_t c, const nfc_data::CombiningRange& r) { return c < r.first; });
  return it != b && cp <= (it - 1)->last ? (it - 1)->ccc : 0;
}

const nfc_data::Decomposition* decomposition(uint32_t cp) {
  const nfc_data::Decomposition* b = nfc_data::kDecompositions;
  const nfc_data::Decomposition* e = b + nfc_data::kDecompositions_size;
  const auto* it = std::lower_bound(b, e, cp, [](const nfc_data::Decomposition& d, uint32_t c) { return d.cp < c; });
  return it != e && it->cp == cp ? it : nullptr;
}

void decompose(uint32_t cp, std::vector<uint32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    const uint32_t s = cp - kSBase;
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  if (const nfc_data::Decomposition* d = decomposition(cp)) {
    decompose(d->first, out);
    if (d->second) decompose(d->second, out);
    return;
  }
  out.push_back(cp);
}

// The primary composite of a + b, or 0 when there is none.
uint32_t compose(uint32_t a, uint32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
    return a + (b - kTBase);
  const nfc_data::Composition* f = nfc_data::kCompositions;
  const nfc_data::Composition* e = f + nfc_data::kCompositions_size;
  const auto* it = std::lower_bound(f, e, std::make_pair(a, b), [](const nfc_data::Composition& c, std::pair<uint32_t, uint32_t> k) {
    return c.first < k.first || (c.first == k.first && c.second < k.second);
  });
  return it != e && it->first == a && it->second == b ? it->composite : 0;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp >= kInvalid) out += char(cp - kInvalid);  // a stray byte, as it came
  else if (cp < 0x80) out += char(cp);
  else if (cp < 0x800) out += char(0xC0 | (cp >> 6)), out += char(0x80 | (cp & 0x3F));
  else if (cp < 0x10000)
    out += char(0xE0 | (cp >> 12)), out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
  else
    out += char(0xF0 | (cp >> 18)), out += char(0x80 | ((cp >> 12) & 0x3F)), out += char(0x80 | ((cp >> 6) & 0x3F)),
        out += char(0x80 | (cp & 0x3F));
}

}  // namespace

std::string nfc(std::string_view text) {
  // Text of code points below U+0300 only (no byte from 0xCC up) is its own NFC: none of them
  // decomposes to something else, has a combining class or composes with what follows
  // (gen_nfc_tables.py checks this).
  if (std::none_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) >= 0xCC; }))
    return std::string(text);

  std::vector<uint32_t> cps;
  cps.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const unicode::Char c = unicode::decode_char(text, i);
    i += c.len;
    if (c.cp >= kInvalid) cps.push_back(c.cp);  // decode_char's 0x110000 + byte
    else decompose(c.cp, cps);
  }

  // Canonical ordering: each run of non-starters stably sorted by combining class. A stable
  // O(n log n) sort, not insertion sort: a hostile line is one run of 100k marks.
  std::vector<uint8_t> cls(cps.size());
  for (size_t i = 0; i < cps.size(); ++i) cls[i] = cps[i] >= kInvalid ? 0 : ccc(cps[i]);
  std::vector<std::pair<uint8_t, uint32_t>> run;
  for (size_t i = 0; i < cps.size();) {
    if (cls[i] == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && cls[j] != 0) ++j;
    if (j - i > 1) {
      run.clear();
      for (size_t a = i; a < j; ++a) run.emplace_back(cls[a], cps[a]);
      std::stable_sort(run.begin(), run.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
      for (size_t a = i; a < j; ++a) cls[a] = run[a - i].first, cps[a] = run[a - i].second;
    }
    i = j;
  }

  // Canonical composition: a character joins the last starter unless blocked (a character in
  // between with class 0 or a class not below its own).
  std::vector<uint32_t> out;
  std::vector<uint8_t> out_cls;
  out.reserve(cps.size()), out_cls.reserve(cps.size());
  size_t starter = SIZE_MAX;
  for (size_t i = 0; i < cps.size(); ++i) {
    const uint32_t c = cps[i];
    const uint8_t k = cls[i];
    if (starter != SIZE_MAX && c < kInvalid && out[starter] < kInvalid) {
      const bool adjacent = starter + 1 == out.size();
      if (adjacent || out_cls.back() < k) {
        if (const uint32_t comp = compose(out[starter], c)) {
          out[starter] = comp;
          continue;
        }
      }
    }
    if (k == 0) starter = out.size();
    out.push_back(c);
    out_cls.push_back(k);
  }

  std::string s;
  s.reserve(text.size() + 8);
  for (uint32_t c : out) append_utf8(c, s);
  return s;
}

}  // namespace hw::data
