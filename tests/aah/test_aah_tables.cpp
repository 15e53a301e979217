// The Table 4 layout from an experiment directory written here by hand.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "headwise/methods/aah/tables.hpp"
#include "train/train_test_util.hpp"

using namespace hw;

namespace {
void write(const std::string& path, const nlohmann::json& j) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << j.dump(2);
}
}  // namespace

TEST_CASE("aah: Table 4 rows average val loss, ACR, tok/s and memory as worked by hand", "[aah][tables]") {
  const std::string dir = test::temp_dir("aah_table4");
  write(dir + "/results.json", nlohmann::json::parse(R"({"seeds": [{"seed": 1}, {"seed": 2}],
    "summary": [{"branch": "full"}, {"branch": "shallow_freeze"}]})"));
  // full: no AAH reports (ACR 1 by definition); 1000 tokens over 10 updates at 50 ms -> 2000 tok/s.
  for (int s : {1, 2})
    write(dir + "/seed_" + std::to_string(s) + "/full/result.json",
          {{"val_loss", s == 1 ? 2.0 : 2.2}, {"steps", 10}, {"tokens", 1000}, {"mean_update_ms", 50.0},
           {"memory_bytes", 4e6}, {"peak_rss_bytes", 1e8}, {"interventions", nlohmann::json::array()}});
  // shallow_freeze, seed 1: control reports 0.5 and 0.3 (mean 0.4), a non-control report ignored;
  // seed 2: one report 0.2. Mean ACR (0.4 + 0.2) / 2 = 0.3. 1000 tokens / 10 updates at 40 and
  // 25 ms -> 2500 and 4000 tok/s, mean 3250.
  write(dir + "/seed_1/shallow_freeze/result.json",
        {{"val_loss", 1.9}, {"steps", 10}, {"tokens", 1000}, {"mean_update_ms", 40.0}, {"memory_bytes", 4e6},
         {"peak_rss_bytes", 1.2e8}});
  const std::string iv1 = dir + "/seed_1/shallow_freeze/interventions/";
  write(iv1 + "step_2.0.aah.json", {{"planner", "aah"}, {"control_update", true}, {"acr", 0.5}});
  write(iv1 + "step_3.0.aah.json", {{"planner", "aah"}, {"control_update", false}, {"acr", 0.9}});
  write(iv1 + "step_7.0.aah.json", {{"planner", "aah"}, {"control_update", true}, {"acr", 0.3}});
  write(iv1 + "step_7.1.saf.json", {{"planner", "saf"}, {"acr", 0.0}});  // another planner's report
  write(dir + "/seed_2/shallow_freeze/result.json",
        {{"val_loss", 2.1}, {"steps", 10}, {"tokens", 1000}, {"mean_update_ms", 25.0}, {"memory_bytes", 4e6},
         {"peak_rss_bytes", 1.0e8}});
  write(dir + "/seed_2/shallow_freeze/interventions/step_2.0.aah.json",
        {{"planner", "aah"}, {"control_update", true}, {"acr", 0.2}});
  const nlohmann::json rows = aah::table4_rows(dir);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0]["branch"] == "full");
  CHECK(rows[0]["val_loss"].get<double>() == Approx(2.1));
  CHECK(rows[0]["acr"].get<double>() == 1.0);
  CHECK(rows[0]["tok_per_s"].get<double>() == Approx(2000));
  CHECK(rows[0]["memory_mb"].get<double>() == Approx(4));
  CHECK(rows[1]["val_loss"].get<double>() == Approx(2.0));
  CHECK(rows[1]["acr"].get<double>() == Approx(0.3));
  CHECK(rows[1]["tok_per_s"].get<double>() == Approx(3250));
  CHECK(rows[1]["peak_rss_mb"].get<double>() == Approx(110));
  const std::string md = aah::table4_markdown(rows);
  CHECK(md.find("| shallow_freeze | 2.0000 | 0.3000 | 3250 | 4.0 | 110.0 |") != std::string::npos);
  CHECK_THROWS_WITH(aah::table4_rows(dir + "/nowhere"), Catch::Contains("results.json: not found"));
}
