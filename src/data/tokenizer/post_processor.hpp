#pragma once
// The special tokens a tokenizer.json's post_processor puts around one sequence, as
// transformers' tokenizer(text) (add_special_tokens=True) adds them: TemplateProcessing's
// "single" template (Llama 3's <|begin_of_text|> before the text), alone or inside a Sequence
// with ByteLevel (which adds nothing), Bert/RobertaProcessing's cls and sep. Another type is
// kept by name and refused when special tokens are asked for.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hw::data {

struct PostProcessor {
  std::vector<uint32_t> prefix, suffix;  // ids before and after the text's
  std::string unsupported;               // a post_processor type not understood ("" = none)
};

// Throws hw::Error naming `name` and the key for a malformed template.
PostProcessor parse_post_processor(const nlohmann::json& pp, const std::string& name);

}  // namespace hw::data
