// Cached decoding refuses the linearization baselines by name (it has no recurrent decode path
// for them) instead of decoding a model without those heads.
#include <catch2/catch.hpp>

#include "headwise/core/error.hpp"
#include "headwise/infer/cached_decoder.hpp"
#include "infer/infer_fixture.hpp"

using namespace hw;
using namespace hw::test;

TEST_CASE("decode: performer, dijiang and taylorshift heads are one clear error naming the head", "[infer]") {
  for (const char* kind : {"performer:8", "dijiang", "taylorshift"}) {
    const std::string plan = std::string(R"([["softmax", "softmax", "softmax", "softmax"], ["linear", "softmax", ")") +
                             kind + R"(", "static"]])";
    const ModelConfig cfg = infer_config({"baseline", 4, "learned", plan});
    auto model = infer_model(cfg);
    INFO(kind);
    CHECK_THROWS_WITH(infer::CachedDecoder(*model, 8), Catch::Contains("layer 1 head 2") && Catch::Contains(std::string("'") + kind + "'") &&
                                                     Catch::Contains("cached decoding does not run"));
  }
}
