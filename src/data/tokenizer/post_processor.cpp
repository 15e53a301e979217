#include "data/tokenizer/post_processor.hpp"

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"

namespace hw::data {

namespace {

using json = nlohmann::json;

void add_processor(PostProcessor& p, const json& pp, const std::string& name, int depth) {
  auto bad = [&](const std::string& what) { fail("tokenizer '" + name + "': post_processor " + what); };
  if (pp.is_null()) return;
  if (!pp.is_object() || !pp.contains("type") || !pp["type"].is_string()) bad("needs a \"type\" string");
  const std::string type = pp["type"].get<std::string>();
  if (type == "ByteLevel") return;  // offsets only
  if (type == "Sequence") {
    if (depth > 4) bad("nests Sequences too deep");
    if (!pp.contains("processors") || !pp["processors"].is_array()) bad("Sequence needs a \"processors\" array");
    for (const json& q : pp["processors"]) add_processor(p, q, name, depth + 1);
    return;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {  // [cls] text [sep]
    auto id_of = [&](const char* key) {
      if (!pp.contains(key) || !pp[key].is_array() || pp[key].size() != 2 || !pp[key][1].is_number_unsigned())
        bad(type + "." + key + " needs [token, id]");
      return pp[key][1].get<uint32_t>();
    };
    p.prefix.push_back(id_of("cls"));
    p.suffix.push_back(id_of("sep"));
    return;
  }
  if (type != "TemplateProcessing") {
    p.unsupported = text_brief(type);
    return;
  }
  if (!pp.contains("single") || !pp["single"].is_array()) bad("TemplateProcessing needs a \"single\" array");
  const json& specials = pp.contains("special_tokens") ? pp["special_tokens"] : json::object();
  if (!specials.is_object()) bad("TemplateProcessing.special_tokens is not an object");
  bool seen_text = false;
  for (const json& item : pp["single"]) {
    if (item.is_object() && item.contains("Sequence")) {
      const json& s = item["Sequence"];
      if (!s.is_object() || s.value("id", "") != "A") bad("TemplateProcessing.single may hold only sequence A");
      seen_text = true;
      continue;
    }
    if (!item.is_object() || !item.contains("SpecialToken") || !item["SpecialToken"].is_object() ||
        !item["SpecialToken"].contains("id") || !item["SpecialToken"]["id"].is_string())
      bad("TemplateProcessing.single holds an item that is neither a Sequence nor a SpecialToken");
    const std::string id = item["SpecialToken"]["id"].get<std::string>();
    if (!specials.contains(id) || !specials[id].is_object() || !specials[id].contains("ids") ||
        !specials[id]["ids"].is_array())
      bad("TemplateProcessing.special_tokens has no ids for '" + text_brief(id) + "'");
    for (const json& v : specials[id]["ids"]) {
      if (!v.is_number_unsigned() || v.get<uint64_t>() >= (uint64_t(1) << 31))
        bad("TemplateProcessing.special_tokens['" + text_brief(id) + "'] holds an id that is not a token id");
      (seen_text ? p.suffix : p.prefix).push_back(v.get<uint32_t>());
    }
  }
  if (!seen_text) bad("TemplateProcessing.single has no sequence A");
}

}  // namespace

PostProcessor parse_post_processor(const json& pp, const std::string& name) {
  PostProcessor p;
  add_processor(p, pp, name, 0);
  return p;
}

}  // namespace hw::data
