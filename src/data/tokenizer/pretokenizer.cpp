#include "data/tokenizer/pretokenizer.hpp"

#include "data/tokenizer/unicode_ranges.hpp"

namespace hw::data {

using unicode::Char;
using unicode::CharClass;
using unicode::decode_char;

namespace {

const char* const kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Scanner {
  std::string_view s;
  Char at(size_t pos) const { return decode_char(s, pos); }
  bool is(size_t pos, CharClass c) const { return pos < s.size() && at(pos).cls == c; }
  // End of the run of characters of class c starting at pos.
  size_t run(size_t pos, CharClass c) const {
    while (pos < s.size()) {
      const Char ch = at(pos);
      if (ch.cls != c) break;
      pos += ch.len;
    }
    return pos;
  }
  size_t run_not_nl(size_t pos) const {  // [\r\n]*
    while (pos < s.size() && (s[pos] == '\r' || s[pos] == '\n')) ++pos;
    return pos;
  }
  // Contractions at pos ("'s" ... "'d"); length matched or 0. ASCII letters only: `tokenizers`
  // (Oniguruma) folds case by ASCII for these.
  size_t contraction(size_t pos, bool fold) const {
    if (pos >= s.size() || s[pos] != '\'') return 0;
    auto c = [&](size_t k) -> char {
      if (pos + k >= s.size()) return 0;
      char ch = s[pos + k];
      if (fold && ch >= 'A' && ch <= 'Z') ch = char(ch - 'A' + 'a');
      return ch;
    };
    const char a = c(1), b = c(2);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }
  // \s+(?!\S) then \s+ at pos (pos is whitespace): the run, less its last character when a
  // non-space follows and the run has more than one character.
  size_t space_tail(size_t pos) const {
    const size_t end = run(pos, CharClass::Space);
    if (end == s.size()) return end;
    const Char first = at(pos);
    if (pos + first.len == end) return end;  // one character: \s+
    size_t last = pos;                       // start of the run's last character
    for (size_t p = pos; p < end; p += at(p).len) last = p;
    return last;
  }
};

size_t next_gpt2(const Scanner& sc, size_t i) {
  if (size_t n = sc.contraction(i, false)) return i + n;
  const Char c = sc.at(i);
  size_t j = i;
  CharClass cls = c.cls;
  if (sc.s[i] == ' ' && i + 1 < sc.s.size()) {
    const CharClass next = sc.at(i + 1).cls;
    if (next != CharClass::Space) j = i + 1, cls = next;
  }
  if (cls != CharClass::Space) return sc.run(j, cls);
  return sc.space_tail(i);
}

size_t next_llama3(const Scanner& sc, size_t i, bool one_digit) {
  if (size_t n = sc.contraction(i, true)) return i + n;
  const Char c = sc.at(i);
  const bool newline = sc.s[i] == '\r' || sc.s[i] == '\n';
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c.cls == CharClass::Letter) return sc.run(i, CharClass::Letter);
  if (!newline && c.cls != CharClass::Number && sc.is(i + c.len, CharClass::Letter))
    return sc.run(i + c.len, CharClass::Letter);
  // \p{N}{1,3}
  if (c.cls == CharClass::Number) {
    size_t j = i + c.len;
    for (int k = 1; k < (one_digit ? 1 : 3) && sc.is(j, CharClass::Number); ++k) j += sc.at(j).len;
    return j;
  }
  //  ?[^\s\p{L}\p{N}]+[\r\n]*
  if (c.cls == CharClass::Other) return sc.run_not_nl(sc.run(i, CharClass::Other));
  if (sc.s[i] == ' ' && sc.is(i + 1, CharClass::Other)) return sc.run_not_nl(sc.run(i + 1, CharClass::Other));
  // \s*[\r\n]+: up to the run's last newline
  const size_t end = sc.run(i, CharClass::Space);
  size_t last_nl = std::string_view::npos;
  for (size_t p = i; p < end; p += sc.at(p).len)
    if (sc.s[p] == '\r' || sc.s[p] == '\n') last_nl = p;
  if (last_nl != std::string_view::npos) return last_nl + 1;
  return sc.space_tail(i);
}

}  // namespace

bool pretokenizer_for_regex(const std::string& regex, PreTokenizer& out) {
  if (regex == kGpt2Regex) out = PreTokenizer::Gpt2;
  else if (regex == kLlama3Regex) out = PreTokenizer::Llama3;
  else if (regex == kQwen2Regex) out = PreTokenizer::Qwen2;
  else return false;
  return true;
}

void pretokenize(PreTokenizer kind, std::string_view text, const std::function<void(size_t, size_t)>& piece) {
  const Scanner sc{text};
  size_t i = 0;
  while (i < text.size()) {
    const size_t j = kind == PreTokenizer::Gpt2 ? next_gpt2(sc, i) : next_llama3(sc, i, kind == PreTokenizer::Qwen2);
    piece(i, j);
    i = j;
  }
}

}  // namespace hw::data
