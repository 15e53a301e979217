#pragma once
// The few Python string operations lm-evaluation-harness applies to task text, in UTF-8, so that
// contexts, choices and their lengths come out as the harness computes them:
// len(str) (code points), str.isspace / str.strip, str.capitalize, str.replace and the
// regular expressions of the HellaSwag preprocessing and the `\s+` word split of perplexity tasks.
#include <cstdint>
#include <string>
#include <string_view>

namespace hw::eval {

// Python len(s): Unicode code points of a UTF-8 string (each byte of an invalid sequence counts
// one, as a surrogate-escaped str would).
int64_t py_len(std::string_view s);
// Python str.isspace() for one code point: bidirectional class WS, B or S, or category Zs
// (\t \n \v \f \r, U+001C..U+001F, space, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028,
// U+2029, U+202F, U+205F, U+3000).
bool py_isspace(uint32_t cp);
// Python str.strip() with no argument: leading and trailing py_isspace code points removed.
std::string py_strip(std::string_view s);
std::string py_rstrip(std::string_view s);  // trailing py_isspace code points removed
// Python str.replace(old, new): non-overlapping, left to right (old non-empty).
std::string py_replace(std::string_view s, std::string_view from, std::string_view to);
// Python str.capitalize(): the first code point upper-cased (title case), the rest lower-cased.
// Case mapping covers ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic basic letters; other
// code points are left as they are (HellaSwag's text is English).
std::string py_capitalize(std::string_view s);
// re.sub(r"\[.*?\]", "", s): every shortest bracketed span without a newline inside, removed.
std::string remove_bracketed(std::string_view s);
// len(re.split(r"\s+", s)): the number of pieces between runs of whitespace, counting the empty
// pieces before leading and after trailing whitespace (lm_eval/api/task.py count_words and
// lm_eval/tasks/wikitext/preprocess_wikitext.py process_results).
int64_t py_split_whitespace_count(std::string_view s);

}  // namespace hw::eval
