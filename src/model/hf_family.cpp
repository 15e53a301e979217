// Hugging Face classes of the model families (hf_family.hpp): what is common to all of them;
// each family's own keys and names are in its file under family/ (family.hpp).
#include "headwise/model/hf_family.hpp"

#include <filesystem>
#include <optional>
#include <string>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/io/files.hpp"
#include "headwise/model/remote_code.hpp"
#include "model/family/family.hpp"

namespace hw {

void validate_family(const ModelConfig& c) {
  const ModelFamily& f = family_named(c.family);
  f.validate(c, "model.family " + c.family + " (" + f.hf_class + ")");
}

void set_hf_model_type(nlohmann::json& j, const ModelConfig& c) {
  if (c.head_plan.all_softmax()) {
    j["model_type"] = c.family;
    j["architectures"] = {family_named(c.family).hf_class};
    return;
  }
  j["model_type"] = "headwise";
  j["architectures"] = {"HeadwiseForCausalLM"};
  j["headwise_family"] = c.family;
  j["auto_map"] = remote_code_auto_map();  // the Python files beside it (remote_code.hpp)
}

nlohmann::json family_hf_config(const nlohmann::json& j, const std::string& path) {
  const std::string who = path + ": model_type \"headwise\" needs headwise_family " + family_names("", " or ");
  check(j.contains("headwise_family"), who);
  const nlohmann::json& f = j["headwise_family"];
  if (f.is_string() && find_family(f.get<std::string>())) {
    nlohmann::json out = j;
    out["model_type"] = f;
    out.erase("headwise_family");
    return out;
  }
  std::string got = who + ", got ";
  if (f.is_string()) got.append("'").append(text_brief(f.get<std::string>())).append("'");
  else got.append(json_brief(f));
  fail(got);
}

std::vector<int32_t> eos_token_ids(const std::string& dir, int64_t vocab) {
  const std::string path = dir + "/generation_config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return {};
  check(std::filesystem::file_size(path, ec) <= (1u << 20), path + ": too large for a generation config");
  const nlohmann::json j = parse_json(io::read_file(path), path);
  check(j.is_object(), path + ": not a JSON object");
  if (!j.contains("eos_token_id") || j["eos_token_id"].is_null()) return {};
  const nlohmann::json& e = j["eos_token_id"];
  std::vector<int32_t> ids;
  for (const auto& v : e.is_array() ? e : nlohmann::json::array({e})) {
    const std::optional<int64_t> id = json_integer(v);
    check(id && *id >= 0 && *id < vocab,
          path + ": eos_token_id " + (id ? std::to_string(*id) : json_brief(v)) + " is not a token id of the vocabulary of " +
              std::to_string(vocab));
    ids.push_back(int32_t(*id));
  }
  return ids;
}

std::vector<HfTensor> hf_tensors(const ModelConfig& c, const ParamSpec& s) {
  return family_named(c.family).hf_tensors(c, s);
}

namespace {
// Row-major [rows, cols] view of a stored tensor (1-D: one row).
void rows_cols(const ParamSpec& s, int64_t& rows, int64_t& cols) {
  cols = s.stored_shape.empty() ? 1 : s.stored_shape.back();
  rows = 1;
  for (size_t i = 0; i + 1 < s.stored_shape.size(); ++i) rows *= s.stored_shape[i];
}
}  // namespace

void hf_split(const ParamSpec& s, const HfTensor& t, const float* stored, float* out) {
  int64_t rows = 0, cols = 0;
  rows_cols(s, rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < t.width; ++c) {
      const float v = stored[r * cols + t.col0 + c];
      if (t.transpose)
        out[c * rows + r] = v;
      else
        out[r * t.width + c] = v;
    }
}

void hf_join(const ParamSpec& s, const HfTensor& t, const float* in, float* stored) {
  int64_t rows = 0, cols = 0;
  rows_cols(s, rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < t.width; ++c)
      stored[r * cols + t.col0 + c] = t.transpose ? in[c * rows + r] : in[r * t.width + c];
}

}  // namespace hw
