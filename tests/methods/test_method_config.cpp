// The method section: one object or a list, each method parsing its own keys; bad input is one
// error naming the key (and the method), never a silent no-op.
#include <catch2/catch.hpp>

#include "headwise/methods/method_registry.hpp"
#include "headwise/methods/saf/config.hpp"
#include "methods/methods_test_util.hpp"

using namespace hw;

namespace {
nlohmann::json doc_with(const nlohmann::json& method) {
  auto doc = test::tiny_saf_doc(test::methods_dir("method_config"));
  doc["method"] = method;
  return doc;
}
std::vector<std::unique_ptr<Planner>> planners_of(const nlohmann::json& method) {
  return make_planners(RunConfig::from_json(doc_with(method)));
}
}  // namespace

TEST_CASE("the method section is none, one method or a list", "[methods][config]") {
  CHECK(planners_of({{"name", "none"}}).empty());
  CHECK(planners_of(nlohmann::json::object()).empty());
  const auto one = planners_of({{"name", "saf"}, {"at_step", 2}});
  REQUIRE(one.size() == 1);
  // The planner writes back its whole configuration, defaults filled in, and it parses again to
  // the same configuration.
  const nlohmann::json c = one[0]->config();
  CHECK(c["name"] == "saf");
  CHECK(c["ratio"] == 0.25);
  CHECK(c["at_step"] == 2);
  CHECK(saf::SafConfig::from_json(c).to_json() == c);
  const auto two = planners_of(nlohmann::json::array({{{"name", "saf"}, {"at_step", 1}},
                                                       {{"name", "saf"}, {"at_step", 5}, {"ratio", 0.5}}}));
  REQUIRE(two.size() == 2);
  CHECK(two[0]->acts_at(1));
  CHECK(two[1]->acts_at(5));
  CHECK(first_action_step(two, 8) == 1);
  // RunConfig writes the list back as it came.
  const RunConfig rc = RunConfig::from_json(doc_with(nlohmann::json::array({{{"name", "saf"}}, {{"name", "saf"}}})));
  CHECK(rc.to_json()["method"].size() == 2);
}

TEST_CASE("bad method input is one error naming the key", "[methods][config]") {
  CHECK_THROWS_WITH(planners_of({{"name", "aah_typo"}}), Catch::Contains("method.name = \"aah_typo\" is not a method") &&
                                                             Catch::Contains("available: none, ") && Catch::Contains("saf"));
  CHECK_THROWS_WITH(planners_of({{"name", "saf"}, {"window", 3}}),
                    Catch::Contains("method.window") && Catch::Contains("not a key of method \"saf\""));
  CHECK_THROWS_WITH(RunConfig::from_json(doc_with(nlohmann::json::array({{{"name", "saf"}}, {{"ratio", 0.5}}}))),
                    Catch::Contains("method[1]: missing string key 'name'"));
  CHECK_THROWS_WITH(RunConfig::from_json(doc_with({{"ratio", 0.5}})), Catch::Contains("method: missing string key 'name'"));
  CHECK_THROWS_WITH(RunConfig::from_json(doc_with({{"name", "none"}, {"ratio", 0.5}})),
                    Catch::Contains("method.ratio: method \"none\" has no keys"));
  CHECK_THROWS_WITH(RunConfig::from_json(doc_with(nlohmann::json::array())), Catch::Contains("empty list"));
  CHECK_THROWS_WITH(RunConfig::from_json(doc_with(nlohmann::json::array({{{"name", "none"}}}))),
                    Catch::Contains("method[0].name = \"none\" in a list"));
  CHECK_THROWS_WITH(planners_of(nlohmann::json::array({{{"name", "saf"}}, {{"name", "saf"}, {"ratio", 2.0}}})),
                    Catch::Contains("method[1].ratio must be in [0, 1]"));
  CHECK_THROWS_WITH(planners_of({{"name", "saf"}, {"at_step", 9}}),
                    Catch::Contains("method.at_step") && Catch::Contains("beyond the run's train.steps = 8"));
  CHECK_THROWS_WITH(planners_of({{"name", "saf"}, {"ratio", "half"}}), Catch::Contains("method.ratio"));
}
