#include "headwise/core/json_fields.hpp"

#include "headwise/core/json_parse.hpp"

namespace hw {

JsonFields::JsonFields(const nlohmann::json& obj, std::string section) : obj_(obj), section_(std::move(section)) {
  check(obj_.is_object(), "config section '" + section_ + "' must be a JSON object");
}

const nlohmann::json* JsonFields::find(const char* key) {
  known_.insert(key);
  auto it = obj_.find(key);
  return it == obj_.end() ? nullptr : &*it;
}

namespace {
[[noreturn]] void type_error(const std::string& section, const char* key, const char* want, const nlohmann::json& v) {
  fail("config key " + section + "." + key + ": expected " + want + ", got " + json_brief(v));
}
}  // namespace

void JsonFields::get(const char* key, int& out) {
  int64_t v = out;
  get(key, v);
  check(v >= INT32_MIN && v <= INT32_MAX,
        "config key " + section_ + "." + key + ": " + std::to_string(v) + " is out of range (32-bit)");
  out = static_cast<int>(v);
}

void JsonFields::get(const char* key, int64_t& out) {
  if (auto* v = find(key)) {
    const std::optional<int64_t> x = json_integer(*v);  // 1e6 is a fine integer; 2.5 and 1e30 are not
    if (!x) type_error(section_, key, "an integer", *v);
    out = *x;
  }
}

void JsonFields::get(const char* key, double& out) {
  if (auto* v = find(key)) {
    if (!v->is_number()) type_error(section_, key, "a number", *v);
    out = v->get<double>();
  }
}

void JsonFields::get(const char* key, bool& out) {
  if (auto* v = find(key)) {
    if (!v->is_boolean()) type_error(section_, key, "true or false", *v);
    out = v->get<bool>();
  }
}

void JsonFields::get(const char* key, std::string& out) {
  if (auto* v = find(key)) {
    if (!v->is_string()) type_error(section_, key, "a string", *v);
    out = v->get<std::string>();
  }
}

const nlohmann::json* JsonFields::raw(const char* key) { return find(key); }

void JsonFields::finish(const std::string& owner) const {
  for (auto it = obj_.begin(); it != obj_.end(); ++it)
    check(known_.count(it.key()) > 0, "unknown config key " + section_ + "." + it.key() +
                                          (owner.empty() ? "" : " (not a key of " + owner + ")"));
}

nlohmann::json read_json_file(const std::string& path) {
  return read_json(path, "config file " + path, JsonSyntax{.comments = true});
}

void apply_override(nlohmann::json& doc, const std::string& assignment) {
  // (fuzz_config_json found this: a document "2" made operator[] throw json's type_error)
  check(doc.is_object(), "--set " + text_brief(assignment) + ": the config is not a JSON object, got " + json_brief(doc));
  auto eq = assignment.find('=');
  check(eq != std::string::npos && eq > 0, "--set expects section.key=value, got '" + assignment + "'");
  std::string path = assignment.substr(0, eq), text = assignment.substr(eq + 1);
  auto dot = path.find('.');
  check(dot != std::string::npos && dot > 0 && dot + 1 < path.size(),
        "--set expects section.key=value, got '" + assignment + "'");
  std::string section = path.substr(0, dot), key = path.substr(dot + 1);
  nlohmann::json value;
  try {
    value = parse_json(text, "--set " + path);
  } catch (const Error&) {
    value = text;  // bare words are strings (a value nested too deep is one too)
  }
  if (!doc.contains(section)) doc[section] = nlohmann::json::object();
  check(doc[section].is_object(), "config section '" + section + "' must be a JSON object");
  // Nested keys: model.lora.rank=8 sets {"model": {"lora": {"rank": 8}}}.
  nlohmann::json* node = &doc[section];
  std::string walked = section;
  for (size_t dot2; (dot2 = key.find('.')) != std::string::npos;) {
    const std::string part = key.substr(0, dot2);
    check(!part.empty() && dot2 + 1 < key.size(), "--set expects section.key=value, got '" + assignment + "'");
    walked += "." + part;
    if (!node->contains(part)) (*node)[part] = nlohmann::json::object();
    node = &(*node)[part];
    check(node->is_object(), "--set " + path + ": " + walked + " is not a JSON object");
    key = key.substr(dot2 + 1);
  }
  (*node)[key] = value;
}

}  // namespace hw
