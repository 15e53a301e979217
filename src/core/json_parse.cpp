#include "headwise/core/json_parse.hpp"

#include <cmath>
#include <filesystem>
#include <fstream>

namespace hw {

int json_nesting_depth(std::string_view s, bool comments, int limit) {
  int depth = 0, deepest = 0;
  const size_t n = s.size();
  for (size_t i = 0; i < n; ++i) {
    const char c = s[i];
    if (c == '"') {  // a string: brackets inside are text (an escape skips the next byte)
      for (++i; i < n && s[i] != '"'; ++i)
        if (s[i] == '\\') ++i;
    } else if (comments && c == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n') ++i;
    } else if (comments && c == '/' && i + 1 < n && s[i + 1] == '*') {
      const size_t end = s.find("*/", i + 2);
      i = end == std::string_view::npos ? n : end + 1;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest && (deepest = depth) > limit) return deepest;
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced text is the parser's to refuse
    }
  }
  return deepest;
}

namespace {
// Line and column (1-based) of a byte offset, for parse errors.
std::string position_of(std::string_view text, size_t byte) {
  byte = std::min(byte, text.size());
  size_t line = 1, col = 1;
  for (size_t i = 0; i < byte; ++i) {
    if (text[i] == '\n') ++line, col = 1;
    else ++col;
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(col);
}
}  // namespace

nlohmann::json parse_json(std::string_view text, const std::string& what, JsonSyntax syntax) {
  check(json_nesting_depth(text, syntax.comments) <= kMaxJsonDepth,
        what + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  try {
    return nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/true, syntax.comments);
  } catch (const nlohmann::json::parse_error& e) {
    // e.what() quotes the last token read, which can be the whole of a long string: only the place.
    fail(what + ": not valid JSON (error at " + position_of(text, e.byte > 0 ? e.byte - 1 : 0) + ")");
  } catch (const nlohmann::json::exception&) {  // out_of_range 406: 1e400 (fuzz_config_json found it)
    fail(what + ": not valid JSON (a number beyond the range of a double)");
  }
}

nlohmann::json read_json(const std::string& path, const std::string& what, JsonSyntax syntax, int64_t max_bytes) {
  namespace fs = std::filesystem;
  std::error_code ec;
  check(fs::is_regular_file(path, ec), what + ": no such file (or not a regular file)");
  const auto size = fs::file_size(path, ec);
  check(!ec, what + ": cannot get its size (" + ec.message() + ")");
  check(size <= uint64_t(max_bytes), what + ": " + std::to_string(size) + " bytes is more than the " +
                                         std::to_string(max_bytes) + " a JSON file may have");
  std::ifstream in(path, std::ios::binary);
  check(in.good(), what + ": cannot open");
  std::string text(size_t(size), '\0');
  in.read(text.data(), std::streamsize(size));
  check(size_t(in.gcount()) == size_t(size), what + ": cannot read (the file changed while reading?)");
  return parse_json(text, what, syntax);
}

std::string text_brief(std::string_view s, size_t max_chars) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  size_t i = 0;
  for (; i < s.size() && i < max_chars; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (i < s.size()) out += " ... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string json_brief(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    case nlohmann::json::value_t::number_integer:
    case nlohmann::json::value_t::number_unsigned:
    case nlohmann::json::value_t::number_float: return "number " + v.dump();  // scalars: short
    case nlohmann::json::value_t::string: return "string \"" + text_brief(v.get_ref<const std::string&>()) + "\"";
    case nlohmann::json::value_t::array: return "a list of " + std::to_string(v.size()) + " values";
    case nlohmann::json::value_t::object: return "an object of " + std::to_string(v.size()) + " keys";
    default: return std::string("a ") + v.type_name();
  }
}

std::optional<int64_t> json_integer(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > uint64_t(INT64_MAX)) return std::nullopt;
    return int64_t(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    // [-2^63, 2^63): the doubles whose conversion to int64 is defined.
    if (!std::isfinite(d) || d != std::trunc(d) || d < -0x1p63 || d >= 0x1p63) return std::nullopt;
    return int64_t(d);
  }
  return std::nullopt;
}

int64_t json_int(const nlohmann::json& v, const std::string& where, int64_t lo, int64_t hi) {
  const std::optional<int64_t> x = json_integer(v);
  check(x.has_value(), where + ": expected an integer, got " + json_brief(v));
  check(*x >= lo && *x <= hi, where + ": " + std::to_string(*x) + " is outside [" + std::to_string(lo) + ", " +
                                  std::to_string(hi) + "]");
  return *x;
}

double json_number(const nlohmann::json& v, const std::string& where) {
  check(v.is_number(), where + ": expected a number, got " + json_brief(v));
  return v.get<double>();
}

bool json_bool(const nlohmann::json& v, const std::string& where) {
  check(v.is_boolean(), where + ": expected true or false, got " + json_brief(v));
  return v.get<bool>();
}

std::string json_string(const nlohmann::json& v, const std::string& where) {
  check(v.is_string(), where + ": expected a string, got " + json_brief(v));
  return v.get<std::string>();
}

const nlohmann::json& json_at(const nlohmann::json& obj, const char* key, const std::string& where) {
  check(obj.is_object(), where + ": expected an object, got " + json_brief(obj));
  const auto it = obj.find(key);
  check(it != obj.end(), where + ": missing key '" + key + "'");
  return *it;
}

}  // namespace hw
