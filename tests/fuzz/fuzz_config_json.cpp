// Fuzz target: config JSON. The bytes are parsed as headwise parses every JSON it reads
// (parse_json: depth limit, comments), then as a run config (RunConfig::from_json: the model,
// train, data and method sections, --set style overrides) and as a checkpoint's config.json
// (ModelConfig::from_hf_config).
#include <string>

#include "fuzz_util.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/train/run_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  hw::fuzz::expect_only_errors([&] {
    nlohmann::json doc = hw::parse_json(text, "fuzz", hw::JsonSyntax{.comments = true});
    hw::fuzz::expect_only_errors([&] { (void)hw::RunConfig::from_json(doc); });
    hw::fuzz::expect_only_errors([&] { (void)hw::ModelConfig::from_hf_config(doc, "fuzz"); });
    hw::fuzz::expect_only_errors([&] {
      hw::apply_override(doc, "model.n_layer=2");
      (void)hw::RunConfig::from_json(doc);
    });
  });
  return 0;
}
