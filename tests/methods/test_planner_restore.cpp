// Every method's planner state as it comes back from a checkpoint's trainer.json (a file from
// elsewhere): restore() checks each key against the model and fails with one hw::Error naming the
// key. AAH keeps state (indices, partitions, EMAs): each key is corrupted in turn -- a head index
// out of range, a partition with a repeat or a gap, a wrong length, a non-finite EMA, a wrong
// type -- and the real state still restores to itself. SAF, AoH and OAL keep none: anything but
// null is refused.
#include <catch2/catch.hpp>
#include <functional>

#include "aah/aah_test_util.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/methods/aah/planner.hpp"
#include "headwise/methods/method_registry.hpp"
#include "methods/methods_test_util.hpp"

using namespace hw;

namespace {

std::string restore_error(Planner& p, const nlohmann::json& state) {
  try {
    p.restore(state);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The state of a tiny AAH run after its last control update (hierarchies, node indices and
// window indices all built), and a fresh planner of the same run to restore into.
struct AahState {
  RunConfig cfg;
  nlohmann::json state;
};

const AahState& aah_state() {
  static const AahState s = [] {
    const std::string dir = test::temp_dir("restore_aah");
    AahState out{RunConfig::from_json(test::tiny_aah_doc(dir)), nullptr};
    dist::LocalComm comm;
    auto planners = make_planners(out.cfg);
    Planner* p = planners[0].get();
    Trainer t(out.cfg, "", comm, std::move(planners));
    t.run();
    out.state = p->state();
    return out;
  }();
  return s;
}

std::unique_ptr<Planner> fresh_aah() {
  auto p = make_planners(aah_state().cfg);
  REQUIRE(p.size() == 1);
  return std::move(p[0]);
}

}  // namespace

TEST_CASE("aah: restore takes back its own state and refuses each corrupted key by name", "[aah][restore]") {
  const nlohmann::json good = aah_state().state;
  // The run built a hierarchy on every layer (else the partition cases below test nothing).
  REQUIRE(good["hierarchy"].size() == 2);
  REQUIRE(!good["hierarchy"][0].empty());
  REQUIRE(!good["level0"][0].empty());
  {
    auto p = fresh_aah();
    CHECK(restore_error(*p, good).empty());
    CHECK(p->state() == good);
  }
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> corrupt;
    const char* needle;
  };
  const int H = 4, K = 4, n = 2 * H;
  const std::vector<Case> cases = {
      {"index out of range", [&](nlohmann::json& s) { s["index"][3] = K; }, "index[3]: 4 is outside [0, 3]"},
      {"negative executed", [](nlohmann::json& s) { s["executed"][0] = -1; }, "executed[0]: -1 is outside"},
      {"executed too short", [](nlohmann::json& s) { s["executed"].erase(0); }, "executed: expected 8 window indices"},
      {"index of strings", [](nlohmann::json& s) { s["index"][1] = "x"; }, "index[1]: expected an integer, got string"},
      {"huge float index", [](nlohmann::json& s) { s["index"][1] = 1e300; }, "index[1]: expected an integer"},
      {"level0 head out of range", [&](nlohmann::json& s) { s["level0"][1][0][0] = H; }, "level0[1][0][0]: 4 is outside [0, 3]"},
      {"level0 head twice",
       [](nlohmann::json& s) {
         s["level0"][0] = nlohmann::json::array({{0, 1}, {1, 2, 3}});
       },
       "level0[0][1]: node 1 is in two groups"},
      {"level0 head missing", [](nlohmann::json& s) { s["level0"][0] = nlohmann::json::array({{0, 1}, {3}}); },
       "level0[0]: node 2 is in no group"},
      {"level0 empty group", [](nlohmann::json& s) { s["level0"][0] = nlohmann::json::array({{0, 1, 2, 3}, nlohmann::json::array()}); },
       "level0[0][1]: an empty group"},
      {"level0 of one layer", [](nlohmann::json& s) { s["level0"].erase(1); }, "level0: expected a list of the model's 2 layers"},
      {"hierarchy member out of range", [](nlohmann::json& s) { s["hierarchy"][1][0][0][0] = 99; },
       "hierarchy[1][0][0][0]: 99 is outside [0, 3]"},
      {"hierarchy upper level gap",
       [](nlohmann::json& s) {
         const size_t below = s["hierarchy"][0][0].size();
         s["hierarchy"][0][1] = nlohmann::json::array({nlohmann::json::array({int(below)})});
       },
       "hierarchy[0][1][0]"},
      {"hierarchy too deep", [](nlohmann::json& s) { s["hierarchy"][0] = nlohmann::json::array({{}, {}, {}, {}, {}}); },
       "hierarchy[0]: expected at most 4 levels"},
      {"node_index out of range",
       [&](nlohmann::json& s) {
         REQUIRE(!s["node_index"][0].empty());
         s["node_index"][0][0][0] = K;
       },
       "node_index[0][0][0]: 4 is outside"},
      {"node_index wrong length", [](nlohmann::json& s) { s["node_index"][0][0].push_back(0); },
       "node_index[0][0]: expected one window index per node"},
      {"resolution not hex", [](nlohmann::json& s) { s["resolution"] = std::string(16 * 8, 'z'); },
       "resolution: a hex list of doubles holds a character that is not a hex digit"},
      {"resolution NaN", [&](nlohmann::json& s) { s["resolution"] = std::string(16 * n, 'f'); },
       "resolution: holds a value outside [0, 3]"},
      {"resolution too short", [](nlohmann::json& s) { s["resolution"] = "0000000000000000"; },
       "resolution: expected 8 values, got 1"},
      {"features wrong length", [](nlohmann::json& s) { s["features"]["ema"] = "0000000000000000"; },
       "features.ema: holds 1 values"},
      {"features infinite", [&](nlohmann::json& s) { s["features"]["sum"] = std::string(16 * 9 * n, '0').replace(0, 16, "7ff0000000000000"); },
       "features.sum: holds a value that is not finite"},
      {"negative count", [](nlohmann::json& s) { s["control_updates"] = -2; }, "control_updates: -2 is outside"},
      {"missing key", [](nlohmann::json& s) { s.erase("executed"); }, "missing key 'executed'"},
      {"not an object", [](nlohmann::json& s) { s = nlohmann::json::array({1}); }, "expected an object, got a list"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    nlohmann::json bad = good;
    c.corrupt(bad);
    auto p = fresh_aah();
    const std::string err = restore_error(*p, bad);
    CHECK_THAT(err, Catch::Contains(c.needle));
    CHECK(p->state() == fresh_aah()->state());  // a refused state leaves the planner as it was
  }
}

TEST_CASE("restore: saf aoh and oal keep no state and refuse anything but null", "[restore]") {
  const std::string dir = test::methods_dir("restore_stateless");
  const std::vector<nlohmann::json> methods = {
      {{"name", "saf"}}, {{"name", "aoh"}, {"sink", 4}, {"window", 8}}, {{"name", "oal"}}};
  for (const nlohmann::json& method : methods) {
    const std::string name = method["name"];
    INFO(name);
    nlohmann::json doc = test::tiny_saf_doc(dir);
    doc["data"]["calib"] = doc["data"]["val"];
    doc["method"] = method;
    auto planners = make_planners(RunConfig::from_json(doc));
    REQUIRE(planners.size() == 1);
    Planner& p = *planners[0];
    CHECK(p.state().is_null());
    CHECK(restore_error(p, nullptr).empty());
    CHECK_THAT(restore_error(p, {{"index", {1, 2}}}),
               Catch::Contains("planner state of '" + name + "': this method keeps no state, got an object"));
    CHECK_THAT(restore_error(p, std::string(1000, 'x')), Catch::Contains("got string \"xxxxx"));
    CHECK(restore_error(p, std::string(1000, 'x')).size() < 200);  // a brief of the value, not the value
  }
}
