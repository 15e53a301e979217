// `headwise plot`: hand-made run directories in, the CSV the figure is drawn from checked cell by
// cell against the hand-written metrics, the PNG checked by its signature and the pixel size the
// plotter asks for (11 x 7 inches at 110 dpi), and bad runs refused with one error line.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "cli/cli_util.hpp"

using hw::test::cli_temp_dir;
using hw::test::error_lines;
using hw::test::run_headwise;
using hw::test::write_text;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

uint32_t big_endian(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | uint8_t(s[at + i]);
  return v;
}

}  // namespace

TEST_CASE("plot draws two runs and writes the CSV it drew, interventions included", "[cli][plot]") {
  const std::string dir = cli_temp_dir("plot");
  namespace fs = std::filesystem;
  fs::create_directories(dir + "/saf_run/interventions");
  fs::create_directories(dir + "/base");
  write_text(dir + "/saf_run/metrics.jsonl",
             "{\"step\":0,\"loss\":5.5,\"lr\":0.25,\"tok_per_s\":1024,\"grad_norm\":2}\n"
             "{\"step\":1,\"loss\":4.75,\"lr\":0.5,\"tok_per_s\":2048}\n"
             "{\"step\":1,\"val_loss\":4.5,\"val_ppl\":90.0}\n");
  write_text(dir + "/saf_run/interventions/step_1.0.saf.json", "{\"step\":1,\"planner\":\"saf\",\"head_plan\":[]}\n");
  write_text(dir + "/base/metrics.jsonl", "{\"step\":0,\"loss\":6,\"lr\":0.125,\"tok_per_s\":512}\n");
  const std::string png = dir + "/curves.png";
  const auto r = run_headwise("plot " + dir + "/saf_run " + dir + "/base/ --out " + png);
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(slurp(dir + "/curves.csv") ==
        "run,step,loss,val_loss,val_ppl,lr,tok_per_s,intervention\n"
        "saf_run,0,5.5,,,0.25,1024,\n"
        "saf_run,1,4.75,,,0.5,2048,\n"
        "saf_run,1,,4.5,90,,,\n"
        "saf_run,1,,,,,,saf\n"
        "base,0,6,,,0.125,512,\n");
  const std::string image = slurp(png);
  REQUIRE(image.size() > 24);
  CHECK(image.substr(0, 8) == "\x89PNG\r\n\x1a\n");
  CHECK(image.substr(12, 4) == "IHDR");
  CHECK(big_endian(image, 16) == 1210);  // width: 11 in x 110 dpi
  CHECK(big_endian(image, 20) == 770);   // height: 7 in x 110 dpi
  CHECK(image.size() > 20000);           // four panels of curves, not a blank canvas
  CHECK_FALSE(fs::exists(png + ".tmp.png"));

  // Two runs with one name are labelled by their paths; the default output is FIRST_RUN/curves.png.
  fs::create_directories(dir + "/other/base");
  write_text(dir + "/other/base/metrics.jsonl", "{\"step\":3,\"loss\":2}\n");
  const auto twice = run_headwise("plot " + dir + "/base " + dir + "/other/base");
  INFO(twice.out);
  REQUIRE(twice.code == 0);
  const std::string csv = slurp(dir + "/base/curves.csv");
  CHECK(csv.find("\n" + dir + "/base,0,6,") != std::string::npos);
  CHECK(csv.find("\n" + dir + "/other/base,3,2,") != std::string::npos);
  CHECK(fs::exists(dir + "/base/curves.png"));
}

TEST_CASE("plot refuses a missing run, a corrupt metrics line and a non-PNG output with one error", "[cli][plot]") {
  const std::string dir = cli_temp_dir("plot_bad");
  namespace fs = std::filesystem;
  fs::create_directories(dir + "/run");
  write_text(dir + "/run/metrics.jsonl", "{\"step\":0,\"loss\":5}\n{\"step\":1,\"loss\":\n");
  struct Case {
    std::string args, culprit;
  };
  for (const Case& c : {Case{dir + "/nowhere", "nowhere' has no metrics.jsonl"},
                        Case{dir + "/run", "metrics.jsonl line 2: not valid JSON"},
                        Case{dir + "/run --out " + dir + "/x.jpg", "must end in .png"}}) {
    const auto r = run_headwise("plot " + c.args);
    INFO(r.out);
    CHECK(r.code == 1);
    CHECK(error_lines(r.out) == 1);
    CHECK(r.out.find(c.culprit) != std::string::npos);
  }
  write_text(dir + "/run/metrics.jsonl", "{\"step\":0,\"loss\":\"five\"}\n");
  const auto r = run_headwise("plot " + dir + "/run");
  CHECK(r.code == 1);
  CHECK(r.out.find("\"loss\" is not a number") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/run/curves.png"));
  CHECK_FALSE(fs::exists(dir + "/run/curves.csv"));
}
