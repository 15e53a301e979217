#include "headwise/methods/method_registry.hpp"

#include "headwise/core/error.hpp"

namespace hw {

const MethodEntry& find_method(const std::string& name, const std::string& where) {
  std::string names;
  for (const auto& e : method_table()) {
    if (e.name == name) return e;
    names += (names.empty() ? "" : ", ") + e.name;
  }
  fail(where + ".name = \"" + name + "\" is not a method of this build (available: none" +
       (names.empty() ? "" : ", " + names) + ")");
}

std::vector<std::unique_ptr<Planner>> make_planners(const RunConfig& cfg) {
  std::vector<std::unique_ptr<Planner>> planners;
  for (size_t i = 0; i < cfg.methods.size(); ++i) {
    const std::string where = cfg.methods.size() == 1 ? "method" : "method[" + std::to_string(i) + "]";
    const nlohmann::json& spec = cfg.methods[i];
    planners.push_back(find_method(spec.at("name").get<std::string>(), where).make(spec, where, cfg));
  }
  return planners;
}

int64_t first_action_step(const std::vector<std::unique_ptr<Planner>>& planners, int64_t steps) {
  for (int64_t s = 0; s <= steps; ++s)  // steps itself: after the last update
    for (const auto& p : planners)
      if (p->acts_at(s)) return s;
  return -1;
}

}  // namespace hw
