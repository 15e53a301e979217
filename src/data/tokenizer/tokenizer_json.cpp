// tokenizer.json -> BpeTokenizer::Impl, refusing what the encoder does not implement (so a file
// never gives ids that differ silently from `tokenizers`).
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include "data/tokenizer/bpe_model.hpp"
#include "data/tokenizer/byte_map.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"

namespace hw::data {

using nlohmann::json;

namespace {

struct Loader {
  std::string name;
  [[noreturn]] void bad(const std::string& what) const { fail("tokenizer '" + name + "': " + what); }

  static bool is_false(const json& obj, const char* key) {
    return !obj.contains(key) || obj[key].is_null() || (obj[key].is_boolean() && !obj[key].get<bool>());
  }
  static bool is_empty_string(const json& obj, const char* key) {
    return !obj.contains(key) || obj[key].is_null() || (obj[key].is_string() && obj[key].get<std::string>().empty());
  }
  static std::string type_of(const json& j) {
    return j.is_object() && j.contains("type") && j["type"].is_string() ? text_brief(j["type"].get<std::string>()) : "?";
  }

  void byte_level(const json& bl, bool want_regex, const std::string& where) const {
    if (!is_false(bl, "add_prefix_space")) bad(where + ".add_prefix_space = true is not supported");
    const bool use_regex = !bl.contains("use_regex") || bl["use_regex"].is_null() || bl["use_regex"].get<bool>();
    if (use_regex != want_regex)
      bad(where + ".use_regex = " + (use_regex ? "true" : "false") + " is not supported here");
  }

  PreTokenizer pre_tokenizer(const json& j) const {
    if (j.is_null()) bad("pre_tokenizer is null: not a byte-level BPE tokenizer");
    const std::string type = type_of(j);
    if (type == "ByteLevel") {
      byte_level(j, true, "pre_tokenizer");
      return PreTokenizer::Gpt2;
    }
    if (type == "Sequence" && j.contains("pretokenizers") && j["pretokenizers"].is_array() &&
        j["pretokenizers"].size() == 2) {
      const json& split = j["pretokenizers"][0];
      if (type_of(split) != "Split") bad("pre_tokenizer.pretokenizers[0] is '" + type_of(split) + "', expected Split");
      if (!split.contains("pattern") || !split["pattern"].is_object() || !split["pattern"].contains("Regex") ||
          !split["pattern"]["Regex"].is_string())
        bad("pre_tokenizer.pretokenizers[0].pattern is not a {\"Regex\": ...}");
      if (!split.contains("behavior") || split["behavior"] != "Isolated")
        bad("pre_tokenizer.pretokenizers[0].behavior must be Isolated");
      if (!is_false(split, "invert")) bad("pre_tokenizer.pretokenizers[0].invert = true is not supported");
      PreTokenizer kind;
      const std::string regex = split["pattern"]["Regex"].get<std::string>();
      if (!pretokenizer_for_regex(regex, kind))
        bad("pre_tokenizer.pretokenizers[0].pattern.Regex is not one of the known ones (GPT-2, Llama 3, Qwen 2): " +
            text_brief(regex, 80));
      const json& bl = j["pretokenizers"][1];
      if (type_of(bl) != "ByteLevel") bad("pre_tokenizer.pretokenizers[1] is '" + type_of(bl) + "', expected ByteLevel");
      byte_level(bl, false, "pre_tokenizer.pretokenizers[1]");
      return kind;
    }
    bad("pre_tokenizer '" + type + "' is not supported (ByteLevel, or Sequence[Split(regex), ByteLevel])");
  }

  // true for NFC (Qwen 2's files), alone or in a Sequence of NFCs only (an empty Sequence is
  // none); any other normalizer is refused.
  bool normalizer(const json& j) const {
    const std::string type = type_of(j);
    if (type == "NFC") return true;
    if (type == "Sequence" && j.contains("normalizers") && j["normalizers"].is_array()) {
      for (size_t i = 0; i < j["normalizers"].size(); ++i)
        if (type_of(j["normalizers"][i]) != "NFC")
          bad("normalizer.normalizers[" + std::to_string(i) + "] '" + type_of(j["normalizers"][i]) +
              "' is not supported (only NFC)");
      return !j["normalizers"].empty();
    }
    bad("normalizer '" + type + "' is not supported (only none or NFC)");
  }

  uint32_t token_id(const BpeTokenizer::Impl& m, const std::string& tok, size_t merge_index) const {
    auto it = m.vocab.find(tok);
    if (it == m.vocab.end())
      bad("model.merges[" + std::to_string(merge_index) + "] uses '" + text_brief(tok) + "', which is not in model.vocab");
    return it->second;
  }

  void fill(BpeTokenizer::Impl& m, const json& root) const {
    if (!root.is_object()) bad("not a JSON object");
    if (!root.contains("model") || !root["model"].is_object()) bad("no 'model' object");
    const json& model = root["model"];
    const std::string type = model.contains("type") ? type_of(model) : (model.contains("merges") ? "BPE" : "?");
    if (type != "BPE") bad("model.type is '" + type + "'; only byte-level BPE is supported");
    if (!model.contains("vocab") || !model["vocab"].is_object()) bad("model.vocab is missing");
    if (!model.contains("merges") || !model["merges"].is_array()) bad("model.merges is missing (the merges table)");
    if (!is_false(model, "byte_fallback")) bad("model.byte_fallback = true is not supported");
    if (model.contains("dropout") && !model["dropout"].is_null() &&
        (!model["dropout"].is_number() || model["dropout"].get<double>() != 0.0))
      bad("model.dropout is not supported");
    if (!is_empty_string(model, "continuing_subword_prefix")) bad("model.continuing_subword_prefix is not supported");
    if (!is_empty_string(model, "end_of_word_suffix")) bad("model.end_of_word_suffix is not supported");
    m.ignore_merges = !is_false(model, "ignore_merges");
    if (root.contains("normalizer") && !root["normalizer"].is_null()) m.nfc = normalizer(root["normalizer"]);
    m.pre = pre_tokenizer(root.contains("pre_tokenizer") ? root["pre_tokenizer"] : json());

    // Ids index per-id tables: they must lie below the number of entries (vocab plus added
    // tokens), so memory follows the file's size, never a large id in a small file.
    const json* added = root.contains("added_tokens") && !root["added_tokens"].is_null() ? &root["added_tokens"] : nullptr;
    if (added && !added->is_array()) bad("added_tokens is not an array");
    const int64_t n_entries = int64_t(model["vocab"].size()) + (added ? int64_t(added->size()) : 0);
    int64_t max_id = -1;
    for (const auto& [tok, idj] : model["vocab"].items()) {
      const std::optional<int64_t> idv = json_integer(idj);
      if (!idj.is_number_integer() || !idv || *idv < 0 || *idv >= n_entries)
        bad("model.vocab['" + text_brief(tok) + "'] = " + json_brief(idj) + " is not an id in 0.." +
            std::to_string(n_entries - 1) + " (ids lie below the number of vocab and added entries)");
      const auto id = uint32_t(idj.get<int64_t>());
      m.vocab[tok] = id;
      max_id = std::max<int64_t>(max_id, id);
    }
    const ByteMap& bm = byte_map();
    for (int b = 0; b < 256; ++b) {
      auto it = m.vocab.find(bm.to_utf8[size_t(b)]);
      if (it == m.vocab.end())
        bad("model.vocab lacks the token of byte " + std::to_string(b) + " ('" + bm.to_utf8[size_t(b)] +
            "'): not a byte-level vocabulary");
      m.byte_id[size_t(b)] = it->second;
    }

    const json& merges = model["merges"];
    m.merges.reserve(merges.size());
    for (size_t r = 0; r < merges.size(); ++r) {
      std::string a, b;
      const json& e = merges[r];
      if (e.is_string()) {  // "a b" (GPT-2's file, older tokenizers)
        const std::string s = e.get<std::string>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 >= s.size() || s.find(' ', sp + 1) != std::string::npos)
          bad("model.merges[" + std::to_string(r) + "] = '" + text_brief(s) + "' is not two tokens separated by one space");
        a = s.substr(0, sp), b = s.substr(sp + 1);
      } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {  // ["a", "b"]
        a = e[0].get<std::string>(), b = e[1].get<std::string>();
      } else {
        bad("model.merges[" + std::to_string(r) + "] is neither \"a b\" nor [\"a\", \"b\"]");
      }
      const uint32_t ia = token_id(m, a, r), ib = token_id(m, b, r), im = token_id(m, a + b, r);
      // A repeated pair keeps its first (lowest) rank.
      m.merges.insert(ia, ib, {uint32_t(r), im});
    }
    m.n_merges = merges.size();

    if (added) {
      for (size_t i = 0; i < added->size(); ++i) {
        const json& t = (*added)[i];
        const std::string where = "added_tokens[" + std::to_string(i) + "]";
        if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
            !t["content"].is_string())
          bad(where + " needs an integer id and a string content");
        for (const char* flag : {"single_word", "lstrip", "rstrip"})
          if (!is_false(t, flag)) bad(where + "." + flag + " = true is not supported");
        AddedToken a;
        a.content = t["content"].get<std::string>();
        if (a.content.empty()) bad(where + " has empty content");
        const std::optional<int64_t> idv = json_integer(t["id"]);
        if (!idv || *idv < 0 || *idv >= n_entries)
          bad(where + " has id " + json_brief(t["id"]) + ", not in 0.." + std::to_string(n_entries - 1) +
              " (ids lie below the number of vocab and added entries)");
        const int64_t id = *idv;
        a.id = uint32_t(id);
        a.special = !is_false(t, "special");
        a.normalized = !is_false(t, "normalized");
        max_id = std::max<int64_t>(max_id, id);
        m.added.push_back(std::move(a));
      }
    }
    m.post = parse_post_processor(root.contains("post_processor") ? root["post_processor"] : json(), name);
    for (const auto* ids : {&m.post.prefix, &m.post.suffix})
      for (const uint32_t id : *ids)
        if (int64_t(id) >= n_entries)
          bad("post_processor adds token id " + std::to_string(id) + ", not in 0.." + std::to_string(n_entries - 1) +
              " (ids lie below the number of vocab and added entries)");
    // `tokenizers` splits the tokens that are not normalized first, then the normalized ones.
    std::stable_partition(m.added.begin(), m.added.end(), [](const AddedToken& a) { return !a.normalized; });

    m.vocab_size = int(max_id + 1);
    m.id_bytes.assign(size_t(m.vocab_size), std::string());
    m.id_known.assign(size_t(m.vocab_size), 0);
    for (const auto& [tok, id] : m.vocab) {
      std::string bytes;
      size_t i = 0;
      while (i < tok.size()) {  // UTF-8 chars of the byte-level string back to bytes
        const auto c0 = static_cast<unsigned char>(tok[i]);
        uint32_t cp = c0;
        size_t len = 1;
        if (c0 >= 0xC0 && c0 < 0xE0 && i + 1 < tok.size()) cp = ((c0 & 0x1Fu) << 6) | (tok[i + 1] & 0x3F), len = 2;
        if (cp < bm.from_cp.size() && bm.from_cp[cp] >= 0 && (len == 2 || cp < 0x80)) {
          bytes += char(bm.from_cp[cp]);
          i += len;
        } else {  // not a byte-level character (e.g. an added token kept in the vocab): its UTF-8
          bytes += tok[i];
          i += 1;
        }
      }
      m.id_bytes[id] = bytes;
      m.id_known[id] = 1;
    }
    for (const AddedToken& a : m.added) {
      m.id_bytes[a.id] = a.content;
      m.id_known[a.id] = 1;
    }
  }
};

}  // namespace

BpeTokenizer BpeTokenizer::from_json_text(const std::string& text, const std::string& name) {
  const json root = parse_json(text, "tokenizer '" + name + "'");
  auto impl = std::make_shared<Impl>();
  impl->name = name;
  try {
    Loader{name}.fill(*impl, root);
  } catch (const json::exception& e) {  // a field of the wrong JSON type (nlohmann's messages are short)
    fail("tokenizer '" + name + "': " + e.what());
  }
  BpeTokenizer t;
  t.impl_ = std::move(impl);
  return t;
}

BpeTokenizer BpeTokenizer::load(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) fail("tokenizer '" + path + "': no such file");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size > uint64_t(kMaxJsonFileBytes))
    fail("tokenizer '" + path + "': " + std::to_string(size) + " bytes is more than the " +
         std::to_string(kMaxJsonFileBytes) + " a JSON file may have");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("tokenizer '" + path + "': cannot open");
  std::string text(size_t(size), '\0');
  in.read(text.data(), std::streamsize(size));
  if (size_t(in.gcount()) != size_t(size)) fail("tokenizer '" + path + "': read error");
  return from_json_text(text, path);
}

}  // namespace hw::data
