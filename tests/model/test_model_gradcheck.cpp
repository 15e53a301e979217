// Whole-model gradients against central finite differences in double precision, for plain
// GPT-2 and for a mixed head plan with RoPE and grouped-query attention; and with most targets
// ignored, where the classifier runs on the rows that have one (in chunks smaller than them).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/model.hpp"
#include "model/gradcheck.hpp"

using namespace hw;

using test::check_model_gradients;

TEST_CASE("GPT-2 gradients match finite differences", "[model][grad]") { check_model_gradients(test::gradcheck_config(false)); }

TEST_CASE("mixed plan with RoPE and GQA: gradients match finite differences", "[model][grad]") {
  check_model_gradients(test::gradcheck_config(true));
}

TEST_CASE("with most targets ignored (the packed-rows classifier), gradients match finite differences",
          "[model][grad]") {
  check_model_gradients(test::gradcheck_config(false), /*sparse=*/true);
  check_model_gradients(test::gradcheck_config(true), /*sparse=*/true);
}
