#pragma once
// The one way headwise parses JSON it did not produce in this process: run configs, --set
// values, a checkpoint's config.json, trainer.json, tokenizer.json, safetensors headers,
// metrics lines. Parsing refuses documents nested deeper than kMaxJsonDepth (checked by a linear
// scan before the parser runs, so nothing afterwards -- copies, dump(), comparisons, which
// recurse -- can overflow the stack) and, for files, larger than a byte limit; every failure is
// one hw::Error naming `what` and the position. Error messages describe values with json_brief
// (a type and a short prefix), never a whole dump.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "headwise/core/error.hpp"

namespace hw {

// Deepest nesting of arrays/objects accepted (headwise's own files nest at most 6 deep).
constexpr int kMaxJsonDepth = 64;
// Largest JSON file read (a tokenizer.json of a 150k vocabulary is ~10 MB; the document in
// memory is ~10x the text).
constexpr int64_t kMaxJsonFileBytes = int64_t(256) << 20;

struct JsonSyntax {
  bool comments = false;  // // and /* */ comments allowed (run configs)
};

// Parses `text`; `what` names the source in errors ("config file 'a.json'").
nlohmann::json parse_json(std::string_view text, const std::string& what, JsonSyntax syntax = {});
// Reads and parses a file of at most max_bytes.
nlohmann::json read_json(const std::string& path, const std::string& what, JsonSyntax syntax = {},
                         int64_t max_bytes = kMaxJsonFileBytes);
// The nesting depth of `text` up to limit + 1 (a scan that skips strings and, when allowed,
// comments; stops once past the limit).
int json_nesting_depth(std::string_view text, bool comments, int limit = kMaxJsonDepth);

// A value for an error message: its type and a short prefix ("string \"abc\"", "number 3.5",
// "a list of 12 values", "an object of 3 keys").
std::string json_brief(const nlohmann::json& v);
// At most max_chars characters of untrusted text, control and non-ASCII bytes escaped (\xHH),
// with " ... (N bytes)" when cut.
std::string text_brief(std::string_view s, size_t max_chars = 48);

// v as an int64 when it is a whole number that fits (an integer, or a float without a fraction
// such as 1e6); nullopt for anything else (strings, 2.5, 1e30, unsigned values above 2^63-1).
std::optional<int64_t> json_integer(const nlohmann::json& v);

// Checked reads for documents whose keys are looked up one by one (checkpoint config.json,
// trainer.json, planner state): `where` names the value ("trainer.json: step"); a wrong type or a
// value outside [lo, hi] is one error showing json_brief of what was there.
int64_t json_int(const nlohmann::json& v, const std::string& where, int64_t lo = INT64_MIN, int64_t hi = INT64_MAX);
double json_number(const nlohmann::json& v, const std::string& where);
bool json_bool(const nlohmann::json& v, const std::string& where);
std::string json_string(const nlohmann::json& v, const std::string& where);
// obj[key], which must exist (obj must be an object).
const nlohmann::json& json_at(const nlohmann::json& obj, const char* key, const std::string& where);

}  // namespace hw
