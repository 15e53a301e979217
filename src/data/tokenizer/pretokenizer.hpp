#pragma once
// The byte-level pre-tokenizers as hand-written scanners that give the same pieces as the
// regexes `tokenizers` runs (leftmost alternative that matches, greedy, with the lookahead's
// backtracking spelled out):
//   Gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   Llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   Qwen2:  as Llama3 with \p{N} (one digit) for \p{N}{1,3}.
#include <functional>
#include <string>
#include <string_view>

namespace hw::data {

enum class PreTokenizer { Gpt2, Llama3, Qwen2 };

// The scanner a Split regex (as written in tokenizer.json) stands for, or false when it is none
// of the known ones.
bool pretokenizer_for_regex(const std::string& regex, PreTokenizer& out);

// Calls piece(begin, end) for each piece of text, in order; the pieces tile the text.
void pretokenize(PreTokenizer kind, std::string_view text, const std::function<void(size_t, size_t)>& piece);

}  // namespace hw::data
