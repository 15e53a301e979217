// The experiment protocol on a tiny config: every branch continues exactly where an
// uninterrupted run would be, and the table's ratios come out of those runs.
#include <algorithm>
#include <cstdio>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "headwise/dist/local_comm.hpp"
#include "headwise/experiment/experiment.hpp"
#include "headwise/methods/method_registry.hpp"
#include "headwise/train/trainer.hpp"
#include "methods/methods_test_util.hpp"

using namespace hw;

namespace {

// Final val PPL of a plain Trainer::run of the config (the trainer's own planner hook).
double uninterrupted_ppl(const RunConfig& cfg, const std::string& dir) {
  dist::LocalComm comm;
  Trainer tr(cfg, dir, comm, make_planners(cfg));
  return tr.run()["val_ppl"].get<double>();
}

const nlohmann::json* row(const nlohmann::json& results, const std::string& name) {
  for (const auto& r : results["summary"])
    if (r["branch"] == name) return &r;
  return nullptr;
}

// tiny_saf_doc's run config with the method section `m` merged on (name "none": ordinary).
RunConfig with_method(nlohmann::json doc, const nlohmann::json& m) {
  doc.erase("experiment");
  if (m.value("name", "") == "none") doc["method"] = nlohmann::json::object();
  for (auto it = m.begin(); it != m.end(); ++it) doc["method"][it.key()] = it.value();
  return RunConfig::from_json(doc);
}

// Runs cfg uninterrupted in dir (the trainer's own planner hook) and returns its summary.
nlohmann::json uninterrupted(const RunConfig& cfg, const std::string& dir) {
  dist::LocalComm comm;
  Trainer tr(cfg, dir, comm, make_planners(cfg));
  return tr.run();
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("experiment spec: generated branches, explicit branches and bad input", "[experiment]") {
  const auto s = ExperimentSpec::from_json(nlohmann::json::object());
  std::vector<std::string> names;
  for (const auto& b : s.branches) names.push_back(b.name);
  CHECK(names == std::vector<std::string>{"ordinary", "saf_25", "saf_50", "prune_25", "random_25", "gate_taylor_25"});
  CHECK(s.branches[3].method["mode"] == "prune");
  CHECK(s.branches[5].method["selector"] == "gate_taylor");
  const auto e = ExperimentSpec::from_json(nlohmann::json::parse(
      R"({"branches": [{"name": "ord", "method": {"name": "none"}}, {"name": "kl", "method": {"selector": "kl"}}]})"));
  CHECK(e.branches[1].method["name"] == "saf");
  CHECK_THROWS_WITH(ExperimentSpec::from_json({{"budget", "flops"}}), Catch::Contains("experiment.budget"));
  CHECK_THROWS_WITH(ExperimentSpec::from_json({{"controls", {"dropout"}}}), Catch::Contains("dropout"));
  CHECK_THROWS_WITH(ExperimentSpec::from_json({{"seed", 3}}), Catch::Contains("experiment.seed"));
  const std::string dir = test::methods_dir("spec");
  auto doc = test::tiny_saf_doc(dir);
  doc["experiment"] = {{"branches", {{{"name", "a"}, {"method", {{"ratio", 0.25}}}}}}};
  CHECK_THROWS_WITH(experiment_from_json(doc), Catch::Contains("reference"));
  doc["experiment"] = {{"ratios", {2.0}}};
  CHECK_THROWS_WITH(experiment_from_json(doc), Catch::Contains("ratios"));
  doc["experiment"] = {{"branches", {{{"name", "o"}, {"method", {{"name", "none"}}}},
                                     {{"name", "s"}, {"method", {{"mode", "zap"}}}}}}};
  CHECK_THROWS_WITH(experiment_from_json(doc), Catch::Contains("branch 's'"));
  // An intervention beyond train.steps (8) is one error naming the branch and the key; at
  // train.steps itself (after the last update) is valid.
  doc["experiment"] = {{"branches", {{{"name", "o"}, {"method", {{"name", "none"}}}},
                                     {{"name", "late"}, {"method", {{"at_step", 9}}}}}}};
  try {
    experiment_from_json(doc);
    FAIL("at_step 9 of 8 updates was accepted");
  } catch (const Error& err) {
    const std::string msg = err.what();
    CHECK(msg.find("branch 'late'") != std::string::npos);
    CHECK(msg.find("method.at_step") != std::string::npos);
    CHECK(msg.find("train.steps = 8") != std::string::npos);
    CHECK(msg.find('\n') == std::string::npos);  // one line
  }
  doc["experiment"]["branches"][1]["method"]["at_step"] = 8;
  CHECK(experiment_from_json(doc).spec.branches.size() == 2);
  doc["experiment"] = {{"at_fractions", {0.5, 1.5}}};
  CHECK_THROWS_WITH(experiment_from_json(doc), Catch::Contains("experiment.at_fractions"));
  doc["experiment"] = {{"at_fractions", {0.5}}, {"branches", {{{"name", "o"}, {"method", {{"name", "none"}}}}}}};
  CHECK_THROWS_WITH(experiment_from_json(doc), Catch::Contains("experiment.at_fractions"));
}

TEST_CASE("experiment spec: at_fractions repeats the generated branches once per intervention point", "[experiment]") {
  const auto spec = nlohmann::json::parse(
      R"({"ratios": [0.25], "controls": ["prune"], "at_fractions": [0.25, 0.5, 0.75, 1.0]})");
  const auto s = ExperimentSpec::from_json(spec);
  std::vector<std::string> names;
  for (const auto& b : s.branches) names.push_back(b.name);
  CHECK(names == std::vector<std::string>{"ordinary", "saf_25_at_25", "prune_25_at_25", "saf_25_at_50",
                                          "prune_25_at_50", "saf_25_at_75", "prune_25_at_75", "saf_25_at_100",
                                          "prune_25_at_100"});
  CHECK(s.branches[7].method["at_fraction"] == 1.0);
  CHECK(s.branches[7].method["at_step"] == -1);
  CHECK(s.branches[8].method["mode"] == "prune");
  // The config's at_step (tiny_saf_doc: 4) does not override the fractions: 2, 4, 6, 8 of 8.
  const std::string dir = test::methods_dir("fractions_spec");
  auto doc = test::tiny_saf_doc(dir);
  doc["experiment"] = spec;
  const ExperimentSetup setup = experiment_from_json(doc);
  std::vector<int64_t> fire;
  for (const auto& b : setup.spec.branches)
    fire.push_back(first_action_step(make_planners(branch_config(setup, b, 5)), 8));
  CHECK(fire == std::vector<int64_t>{-1, 2, 2, 4, 4, 6, 6, 8, 8});
}

TEST_CASE("experiment at several intervention points runs one trunk and resumes each branch at its point",
          "[experiment]") {
  const std::string dir = test::methods_dir("points");
  auto doc = test::tiny_saf_doc(dir);
  doc["train"]["checkpoint_every"] = 0;  // the trunk's checkpoints are the experiment's alone
  doc["experiment"] = {{"ratios", {0.25}}, {"controls", nlohmann::json::array()}, {"at_fractions", {0.25, 0.5, 0.75}}};
  const ExperimentSetup setup = experiment_from_json(doc);
  dist::LocalComm comm;
  const nlohmann::json res = run_experiment(setup, dir + "/out", comm);
  CHECK(res["fire_step"] == 2);
  CHECK(res["fire_steps"] == nlohmann::json::array({2, 4, 6}));
  // One trunk, with one checkpoint per point; one folder per branch.
  const std::string seed_dir = dir + "/out/seed_5";
  CHECK(entries(seed_dir) ==
        std::vector<std::string>{"ordinary", "saf_25_at_25", "saf_25_at_50", "saf_25_at_75", "trunk"});
  CHECK(entries(seed_dir + "/trunk/checkpoints") == std::vector<std::string>{"step_2", "step_4", "step_6"});
  // Independent paths: uninterrupted runs (SAF at each point through the trainer's own hook).
  const auto ord = uninterrupted(with_method(doc, {{"name", "none"}}), dir + "/ref_ord");
  const auto l_ord = test::losses_of(dir + "/ref_ord/metrics.jsonl");
  REQUIRE(l_ord.size() == 8);
  // The trunk ran once, 6 updates: those of the uninterrupted ordinary run.
  const auto l_trunk = test::losses_of(seed_dir + "/trunk/metrics.jsonl");
  CHECK(l_trunk == std::vector<double>(l_ord.begin(), l_ord.begin() + 6));
  // The reference continues from the earliest point exactly as ordinary training.
  const auto ref_r = test::read_json(seed_dir + "/ordinary/result.json");
  CHECK(ref_r["branch_step"] == 2);
  CHECK(ref_r["fire_step"].is_null());
  CHECK(test::losses_of(seed_dir + "/ordinary/metrics.jsonl") == std::vector<double>(l_ord.begin() + 2, l_ord.end()));
  CHECK((*row(res, "ordinary"))["val_ppl"]["mean"].get<double>() == ord["val_ppl"].get<double>());
  for (int64_t p : {2, 4, 6}) {
    const std::string name = "saf_25_at_" + std::to_string(p * 100 / 8);
    INFO(name);
    const std::string ref_dir = dir + "/ref_saf_" + std::to_string(p);
    const auto saf = uninterrupted(with_method(doc, {{"ratio", 0.25}, {"at_step", p}}), ref_dir);
    const auto l_saf = test::losses_of(ref_dir + "/metrics.jsonl");
    REQUIRE(l_saf.size() == 8);
    CHECK(std::vector<double>(l_saf.begin(), l_saf.begin() + p) == std::vector<double>(l_ord.begin(), l_ord.begin() + p));
    const auto r = test::read_json(seed_dir + "/" + name + "/result.json");
    CHECK(r["fire_step"] == p);
    CHECK(r["branch_step"] == p);
    CHECK(r["steps"] == 8);
    CHECK(r["updates_after_intervention"] == 8 - p);
    CHECK(r["static_heads"] == 2);
    // Resumed from the trunk at p: the first logged update is p, with the uninterrupted loss.
    std::ifstream m(seed_dir + "/" + name + "/metrics.jsonl");
    std::string first_line;
    std::getline(m, first_line);
    const auto first = nlohmann::json::parse(first_line);
    CHECK(first["step"] == p);
    CHECK(first["loss"].get<double>() == l_saf[size_t(p)]);
    CHECK(test::losses_of(seed_dir + "/" + name + "/metrics.jsonl") ==
          std::vector<double>(l_saf.begin() + p, l_saf.end()));
    CHECK((*row(res, name))["val_ppl"]["mean"].get<double>() == saf["val_ppl"].get<double>());
    CHECK((*row(res, name))["fire_step"] == p);
    CHECK(std::filesystem::exists(intervention_file(seed_dir + "/" + name, p, 0, "saf")));
  }
  // The table names each branch's intervention step.
  const std::string md = read_text(dir + "/out/table.md");
  CHECK(md.find("| Intervention |") != std::string::npos);
  CHECK(md.find("| saf_25_at_75 | SAF (variance, mean) 25% | 6 |") != std::string::npos);
  CHECK(md.find("| ordinary | ordinary attention | - |") != std::string::npos);
}

TEST_CASE("experiment: an intervention after the last update is evaluated after the change", "[experiment]") {
  const std::string dir = test::methods_dir("after_last");
  auto doc = test::tiny_saf_doc(dir);
  doc["experiment"] = {{"branches", {{{"name", "ordinary"}, {"method", {{"name", "none"}}}},
                                     {{"name", "saf_mid"}, {"method", {{"ratio", 0.25}}}},  // at_step 4
                                     {{"name", "saf_end"}, {"method", {{"ratio", 0.25}, {"at_fraction", 1.0},
                                                                       {"at_step", -1}}}},
                                     {{"name", "prune_end"}, {"method", {{"ratio", 0.25}, {"at_step", 8},
                                                                         {"mode", "prune"}}}}}}};
  const ExperimentSetup setup = experiment_from_json(doc);
  dist::LocalComm comm;
  const nlohmann::json res = run_experiment(setup, dir + "/out", comm);
  CHECK(res["fire_steps"] == nlohmann::json::array({4, 8}));
  const std::string seed_dir = dir + "/out/seed_5";
  const auto r = test::read_json(seed_dir + "/saf_end/result.json");
  CHECK(r["fire_step"] == 8);
  CHECK(r["steps"] == 8);
  CHECK(r["updates_after_intervention"] == 0);
  CHECK(r["mean_update_ms"].is_null());
  CHECK(r["median_update_ms"].is_null());
  CHECK(r["static_heads"] == 2);
  CHECK(test::losses_of(seed_dir + "/saf_end/metrics.jsonl").empty());
  CHECK(std::filesystem::exists(intervention_file(seed_dir + "/saf_end", 8, 0, "saf")));
  const auto& row_end = *row(res, "saf_end");
  CHECK(row_end["update_speedup"].is_null());
  CHECK(row_end["fire_step"] == 8);
  CHECK(row_end["capture_seconds"]["mean"].get<double>() >= 0);
  CHECK(row_end["memory_change_pct"]["mean"].get<double>() < 0);  // Q/K gone
  CHECK((*row(res, "prune_end"))["memory_change_pct"]["mean"].get<double>() < 0);
  CHECK(test::read_json(seed_dir + "/prune_end/result.json")["pruned_heads"] == 2);
  // The final checkpoint holds the replaced heads; evaluating it gives the branch's PPL.
  const auto tj = test::read_json(seed_dir + "/saf_end/final/trainer.json");
  CHECK(tj["step"] == 8);
  CHECK(attn::HeadPlan::from_json(tj["run_config"]["model"]["head_plan"]).count(attn::HeadKind::Static) == 2);
  const RunConfig plain = with_method(doc, {{"name", "none"}});
  const double ppl_end = r["val_ppl"].get<double>();
  {
    Trainer t(plain, "", comm);
    t.resume(seed_dir + "/saf_end/final");
    CHECK(t.model().config().head_plan.count(attn::HeadKind::Static) == 2);
    CHECK(t.eval().ppl == ppl_end);
  }
  // The trunk at train.steps (ordinary attention) evaluates to the ordinary branch's PPL, not this one.
  {
    Trainer t(plain, "", comm);
    t.resume(seed_dir + "/trunk/checkpoints/step_8");
    CHECK(t.model().config().head_plan.count(attn::HeadKind::Static) == 0);
    const double ppl_trunk = t.eval().ppl;
    CHECK(ppl_trunk == test::read_json(seed_dir + "/ordinary/result.json")["val_ppl"].get<double>());
    CHECK(ppl_trunk != ppl_end);
  }
  // The same as SAF after the last update of an uninterrupted run (the trainer's own hook).
  const auto un = uninterrupted(with_method(doc, {{"ratio", 0.25}, {"at_step", 8}}), dir + "/ref_end");
  CHECK(un["val_ppl"].get<double>() == ppl_end);
  // The table: the speed cells of that row are "-".
  const std::string md = read_text(dir + "/out/table.md");
  CHECK(md.find("after the last update") != std::string::npos);
  CHECK(md.find("| saf_end | SAF (variance, mean) 25% | 8 |") != std::string::npos);
  // A time budget gives the branch at train.steps no update either.
  doc["experiment"]["budget"] = "time";
  doc["experiment"]["save_final"] = false;
  const nlohmann::json t = run_experiment(experiment_from_json(doc), dir + "/time", comm);
  CHECK(t["seeds"][0]["branches"][2]["steps"] == 8);
  CHECK(t["seeds"][0]["branches"][2]["updates_after_intervention"] == 0);
  CHECK(t["seeds"][0]["branches"][1]["steps"].get<int64_t>() >= 4);
}

TEST_CASE("experiment branches continue the trunk exactly and the table follows from them", "[experiment]") {
  const std::string dir = test::methods_dir("experiment");
  auto doc = test::tiny_saf_doc(dir);
  doc["experiment"] = {{"ratios", {0.25, 0.5}}, {"controls", {"prune", "random", "gate_taylor"}}};
  const ExperimentSetup setup = experiment_from_json(doc);
  dist::LocalComm comm;
  const nlohmann::json res = run_experiment(setup, dir + "/out", comm);
  REQUIRE(res["summary"].size() == 6);
  CHECK(res["fire_step"] == 4);
  // Independent paths: uninterrupted runs (SAF through the trainer's hook).
  doc.erase("experiment");
  auto method = [&](const nlohmann::json& m) {
    nlohmann::json d = doc;
    if (m.value("name", "") == "none") d["method"] = nlohmann::json::object();
    for (auto it = m.begin(); it != m.end(); ++it) d["method"][it.key()] = it.value();
    return RunConfig::from_json(d);
  };
  const double p_ord = uninterrupted_ppl(method({{"name", "none"}}), dir + "/ref_ord");
  const double p_saf = uninterrupted_ppl(method({{"ratio", 0.25}}), dir + "/ref_saf");
  const double p_prune = uninterrupted_ppl(method({{"ratio", 0.25}, {"mode", "prune"}}), dir + "/ref_prune");
  CHECK((*row(res, "ordinary"))["val_ppl"]["mean"].get<double>() == p_ord);
  CHECK((*row(res, "saf_25"))["val_ppl"]["mean"].get<double>() == p_saf);
  CHECK((*row(res, "prune_25"))["val_ppl"]["mean"].get<double>() == p_prune);
  CHECK((*row(res, "saf_25"))["ppl_change_pct"]["mean"].get<double>() == Approx(100.0 * (p_saf / p_ord - 1)));
  CHECK((*row(res, "ordinary"))["ppl_change_pct"]["mean"].get<double>() == 0.0);
  CHECK((*row(res, "ordinary"))["update_speedup"]["mean"].get<double>() == 1.0);
  // Same-head pruning took SAF's heads; the branches saved what they replaced.
  const auto saf_j = test::read_json(intervention_file(dir + "/out/seed_5/saf_25", 4, 0, "saf"));
  const auto prune_j = test::read_json(intervention_file(dir + "/out/seed_5/prune_25", 4, 0, "saf"));
  CHECK(saf_j["selected"] == prune_j["selected"]);
  const auto prune_r = test::read_json(dir + "/out/seed_5/prune_25/result.json");
  CHECK(prune_r["pruned_heads"] == 2);
  // Memory: pruning drops parameters, moments, gradients and activations; SAF drops Q/K.
  CHECK((*row(res, "prune_25"))["memory_change_pct"]["mean"].get<double>() < 0);
  CHECK((*row(res, "saf_25"))["memory_change_pct"]["mean"].get<double>() < 0);
  CHECK((*row(res, "saf_50"))["memory_change_pct"]["mean"].get<double>() <
        (*row(res, "saf_25"))["memory_change_pct"]["mean"].get<double>());
  // Calibration and fit seconds: those of the intervention log the planner wrote.
  CHECK((*row(res, "saf_25"))["capture_seconds"]["mean"].get<double>() == saf_j["capture_seconds"].get<double>());
  CHECK((*row(res, "saf_25"))["fit_seconds"]["mean"].get<double>() == saf_j["fit_seconds"].get<double>());
  CHECK(saf_j["capture_seconds"].get<double>() > 0);
  CHECK((*row(res, "ordinary"))["capture_seconds"].is_null());
  // Update speedup: the ordinary branch's mean update_ms over SAF's, both from their
  // metrics.jsonl with each branch's first update (the intervention step) left out.
  auto mean_update_ms = [&](const std::string& branch) {
    std::ifstream in(dir + "/out/seed_5/" + branch + "/metrics.jsonl");
    std::string line;
    double sum = 0;
    int n = 0, seen = 0;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      if (!j.contains("update_ms")) continue;
      if (seen++ == 0) continue;
      sum += j["update_ms"].get<double>();
      ++n;
    }
    REQUIRE(n == 3);  // updates 5, 6, 7
    return sum / n;
  };
  CHECK((*row(res, "saf_25"))["update_speedup"]["mean"].get<double>() ==
        Approx(mean_update_ms("ordinary") / mean_update_ms("saf_25")).epsilon(1e-12));
  // Peak RSS: the branch's own high-water mark (reset at its start), at least its start RSS and
  // its arenas; the change against ordinary's peak.
  const auto ord_r = test::read_json(dir + "/out/seed_5/ordinary/result.json");
  const auto saf_r = test::read_json(dir + "/out/seed_5/saf_25/result.json");
  for (const auto* r : {&ord_r, &saf_r, &prune_r}) {
    CHECK((*r)["peak_rss_scope"] == "branch");
    CHECK((*r)["peak_rss_bytes"].get<double>() >= (*r)["rss_start_bytes"].get<double>());
    CHECK((*r)["peak_rss_bytes"].get<double>() >= (*r)["memory_bytes"].get<double>());
  }
  CHECK((*row(res, "saf_25"))["peak_rss_change_pct"]["mean"].get<double>() ==
        Approx(100.0 * (saf_r["peak_rss_bytes"].get<double>() / ord_r["peak_rss_bytes"].get<double>() - 1)));
  CHECK((*row(res, "saf_25"))["memory_change_pct"]["mean"].get<double>() ==
        Approx(100.0 * (saf_r["memory_bytes"].get<double>() / ord_r["memory_bytes"].get<double>() - 1)));
  CHECK((*row(res, "saf_25"))["peak_rss_scope"] == "branch");
  // Files: the table names every branch; a resumable final checkpoint per branch.
  std::ifstream md(dir + "/out/table.md");
  std::stringstream ss;
  ss << md.rdbuf();
  for (const char* b : {"ordinary", "saf_25", "saf_50", "prune_25", "random_25", "gate_taylor_25"})
    CHECK(ss.str().find(std::string("| ") + b + " |") != std::string::npos);
  CHECK(ss.str().find("| Arena memory change (%) | Peak RSS change (%) |") != std::string::npos);
  CHECK(std::filesystem::exists(dir + "/out/results.json"));
  CHECK(std::filesystem::exists(dir + "/out/seed_5/gate_taylor_25/final/trainer.json"));
}

TEST_CASE("experiment over seeds reports mean and standard deviation, and time budgets run", "[experiment]") {
  const std::string dir = test::methods_dir("seeds");
  auto doc = test::tiny_saf_doc(dir);
  doc["experiment"] = {{"seeds", {5, 6}},
                       {"save_final", false},
                       {"branches", {{{"name", "ordinary"}, {"method", {{"name", "none"}}}},
                                     {{"name", "saf"}, {"method", {{"ratio", 0.5}}}}}}};
  dist::LocalComm comm;
  const nlohmann::json res = run_experiment(experiment_from_json(doc), dir + "/out", comm);
  const auto& ppl = (*row(res, "saf"))["val_ppl"];
  const auto& v = ppl["values"];
  REQUIRE(v.size() == 2);
  CHECK(v[0].get<double>() != v[1].get<double>());  // the seeds differ
  const double mean = (v[0].get<double>() + v[1].get<double>()) / 2;
  CHECK(ppl["mean"].get<double>() == Approx(mean));
  CHECK(ppl["std"].get<double>() == Approx(std::abs(v[0].get<double>() - v[1].get<double>()) / std::sqrt(2.0)));
  CHECK(res["seeds"][1]["branches"][1]["val_ppl"].get<double>() == v[1].get<double>());
  // Time-matched: the reference runs to train.steps; the other branch gets its wall time.
  doc["experiment"]["budget"] = "time";
  doc["experiment"]["seeds"] = {5};
  const nlohmann::json t = run_experiment(experiment_from_json(doc), dir + "/time", comm);
  CHECK(t["seeds"][0]["branches"][0]["steps"] == 8);
  CHECK(t["seeds"][0]["branches"][1]["steps"].get<int64_t>() >= 4);
  CHECK(t["budget"] == "time");
  // The budget arithmetic from the recorded numbers (both branches resume at update 4): the
  // budget is the reference's training ms (the sum of its metrics.jsonl "ms"); the SAF branch
  // trains while its own summed update ms (not its calibration and fit) is below it.
  auto update_ms = [&](const std::string& branch) {
    std::vector<double> out;
    std::ifstream in(dir + "/time/seed_5/" + branch + "/metrics.jsonl");
    std::string line;
    while (std::getline(in, line)) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("ms")) out.push_back(j["ms"].get<double>());
    }
    return out;
  };
  const std::vector<double> ref_ms = update_ms("ordinary"), saf_ms = update_ms("saf");
  REQUIRE(ref_ms.size() == 4);  // updates 4..7
  REQUIRE(!saf_ms.empty());
  double ref_total = 0, saf_total = 0;
  for (double x : ref_ms) ref_total += x;
  for (double x : saf_ms) saf_total += x;
  const auto& ref_r = t["seeds"][0]["branches"][0];
  const auto& saf_r = t["seeds"][0]["branches"][1];
  CHECK(saf_r["budget_seconds"].get<double>() == Approx(ref_total / 1000).epsilon(1e-9));
  CHECK(ref_r["budget_seconds"].is_null());
  CHECK(saf_r["train_seconds"].get<double>() == Approx(saf_total / 1000).epsilon(1e-9));
  CHECK(saf_total >= ref_total);                     // the budget was spent on updates
  CHECK(saf_total - saf_ms.back() < ref_total);      // and the last update started under it
  CHECK(saf_r["steps"] == 4 + int64_t(saf_ms.size()));
  const double iv = saf_r["intervention_seconds"].get<double>();
  CHECK(iv > 0);
  CHECK(iv >= saf_r["capture_seconds"].get<double>() + saf_r["fit_seconds"].get<double>());
  CHECK(saf_r["wall_seconds"].get<double>() == Approx(iv + saf_total / 1000).epsilon(1e-9));
  // The summary and the table report it as its own column (the reference: "-").
  CHECK((*row(t, "saf"))["intervention_seconds"]["mean"].get<double>() == iv);
  CHECK((*row(t, "ordinary"))["intervention_seconds"].is_null());
  const std::string md = read_text(dir + "/time/table.md");
  CHECK(md.find("| Fit (s) | Intervention time (s) | Updates |") != std::string::npos);
  char cellv[32];
  std::snprintf(cellv, sizeof cellv, "| %.2f | %d |", iv, int(saf_r["steps"].get<int64_t>()));
  CHECK(md.find(cellv) != std::string::npos);
}

TEST_CASE("a branch's clock: a time budget counts its updates, not its interventions", "[experiment]") {
  // Hand-worked: a 500 ms calibration and fit, updates of 100 ms, a 250 ms budget (the
  // reference's updates). Counting the updates only, updates start at 0, 100 and 200 ms of
  // training: three updates. Charging the intervention, none would start (500 >= 250).
  BranchClock c;
  c.add_intervention(500.0);
  int updates = 0;
  while (c.budgeted_ms() < 250.0) {
    c.add_update(100.0);
    ++updates;
  }
  CHECK(updates == 3);
  CHECK(c.train_ms == 300.0);
  CHECK(c.intervention_ms == 500.0);
  c.add_intervention(20.0);  // a later act of the methods: also outside the budget
  CHECK(c.budgeted_ms() == 300.0);
  CHECK(c.intervention_ms == 520.0);
}

TEST_CASE("the shipped timing-study config: SAF 25% at 25/50/75/100% of the run from one trunk", "[experiment][configs]") {
  const ExperimentSetup s =
      load_experiment(std::string(HEADWISE_SOURCE_DIR) + "/configs/experiment_saf_timing_cpu.json", {});
  std::vector<std::string> names;
  std::vector<int64_t> fire;
  for (const auto& b : s.spec.branches) {
    names.push_back(b.name);
    fire.push_back(first_action_step(make_planners(branch_config(s, b, s.spec.seeds.front())), s.base.train.steps));
  }
  CHECK(names == std::vector<std::string>{"ordinary", "saf_25_at_25", "saf_25_at_50", "saf_25_at_75", "saf_25_at_100"});
  CHECK(fire == std::vector<int64_t>{-1, 125, 250, 375, 500});  // 500 = after the last update
}

TEST_CASE("the update speed across ranks is the slowest rank's update time", "[experiment]") {
  // Two ranks whose updates took 10 and 30 ms (rank 1 waited less in the all-reduce but
  // computed longer): both report 30, as the paper's 4-GPU update speed; one rank: its own.
  std::vector<double> got(2);
  test::run_ranks(2, [&](dist::Comm& c) { got[size_t(c.rank())] = slowest_rank_ms(c, c.rank() == 0 ? 10.0 : 30.0); });
  CHECK(got == std::vector<double>{30.0, 30.0});
  dist::LocalComm one;
  CHECK(slowest_rank_ms(one, 12.5) == 12.5);
}

TEST_CASE("an experiment on 2 ranks times each update as its slowest rank", "[experiment]") {
  // Each rank's own update time differs (its clock, its share of the all-reduce); the branch's
  // update_ms must be the same on both ranks: the maximum of the two, the paper's 4-GPU speed.
  const std::string dir = test::methods_dir("two_ranks");
  auto doc = test::tiny_saf_doc(dir);
  doc["experiment"] = {{"save_final", false},
                       {"branches", {{{"name", "ordinary"}, {"method", {{"name", "none"}}}},
                                     {{"name", "saf"}, {"method", {{"ratio", 0.5}}}}}}};
  const ExperimentSetup setup = experiment_from_json(doc);
  std::vector<nlohmann::json> got(2);
  test::run_ranks(2, [&](dist::Comm& c) { got[size_t(c.rank())] = run_experiment(setup, dir + "/out", c); });
  for (size_t b = 0; b < 2; ++b) {
    const auto& r0 = got[0]["seeds"][0]["branches"][b];
    const auto& r1 = got[1]["seeds"][0]["branches"][b];
    CHECK(r0["update_ms_ranks"] == 2);
    CHECK(r0["mean_update_ms"].get<double>() == r1["mean_update_ms"].get<double>());
    CHECK(r0["median_update_ms"].get<double>() == r1["median_update_ms"].get<double>());
  }
}
