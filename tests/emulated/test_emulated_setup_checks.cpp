// The CUDA attention's host-side checks (attention_setup.cpp) on a linear head's int tensor
// (issue 35): the kernels index L's rows with groups[d], so the setup refuses values outside
// 1..G and G outside 1..head_dim before any launch, instead of reading out of bounds on the device.
#include <catch2/catch.hpp>

#include <vector>

#include "headwise/core/error.hpp"
#include "kernels/cuda/attention_setup.hpp"

namespace {

std::string check_error(const std::vector<int32_t>& groups, int n_groups) {
  const hw::attn::LayerPlan plan = {hw::attn::HeadSpec::parse("linear"), hw::attn::HeadSpec::parse("softmax")};
  const auto layout = hw::attn::LayerLayout::build(plan, 2, 2, 64);
  std::vector<float> L(size_t((n_groups + 1) * (n_groups + 1)), 0.5f);
  hw::attn::LayerHeadParams<float> params;
  params.linear_eps = 1e-6f;
  params.statics.resize(2);
  params.linears.push_back({L.data(), nullptr, groups.data(), n_groups});
  params.linears.push_back({});
  try {
    hw::cuda::check_attention_layer(plan, layout, hw::attn::AttnDims{1, 8}, params, false);
  } catch (const hw::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("emulated: the CUDA setup refuses linear groups outside 1..G", "[emulated][hostile]") {
  std::vector<int32_t> good(64);
  for (int d = 0; d < 64; ++d) good[size_t(d)] = 1 + d % 3;
  CHECK(check_error(good, 3).empty());
  std::vector<int32_t> bad = good;
  bad[17] = 4;
  CHECK_THAT(check_error(bad, 3), Catch::Contains("head 0: groups[17] = 4 is outside 1..3"));
  std::vector<int32_t> zero = good;
  zero[0] = 0;
  CHECK_THAT(check_error(zero, 3), Catch::Contains("groups[0] = 0 is outside 1..3"));
  CHECK_THAT(check_error(std::vector<int32_t>(64, 1), 65), Catch::Contains("n_groups 65 (must be 1..head_dim)"));
}
