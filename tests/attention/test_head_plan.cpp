// HeadSpec text form, HeadPlan JSON and validation, LayerLayout slots for mixed GQA plans.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "headwise/attention/head_plan.hpp"
#include "headwise/core/error.hpp"

using namespace hw::attn;

TEST_CASE("HeadSpec parses every kind and round-trips through str()") {
  CHECK(HeadSpec::parse("softmax") == HeadSpec{HeadKind::Softmax, 0, 0});
  CHECK(HeadSpec::parse("window:64") == HeadSpec{HeadKind::Window, 64, 0});
  CHECK(HeadSpec::parse("sink_window:4:256") == HeadSpec{HeadKind::SinkWindow, 256, 4});
  CHECK(HeadSpec::parse("sink_window:0:1") == HeadSpec{HeadKind::SinkWindow, 1, 0});
  CHECK(HeadSpec::parse("static") == HeadSpec{HeadKind::Static, 0, 0});
  CHECK(HeadSpec::parse("linear") == HeadSpec{HeadKind::Linear, 0, 0});
  CHECK(HeadSpec::parse("pruned") == HeadSpec{HeadKind::Pruned, 0, 0});
  CHECK(HeadSpec::parse("window:2147483647").window == 2147483647);
  for (const char* s : {"softmax", "window:1", "window:4096", "sink_window:64:256", "static", "linear", "pruned"})
    CHECK(HeadSpec::parse(s).str() == s);
}

TEST_CASE("HeadSpec rejects bad strings with one clear line") {
  try {
    HeadSpec::parse("windw:64");
    FAIL("no error");
  } catch (const hw::Error& e) {
    CHECK(std::string(e.what()) ==
          "head plan: bad head kind 'windw:64' (expected softmax, window:W, sink_window:S:W, static, linear, pruned, "
          "performer, performer:M, dijiang, taylorshift)");
  }
  for (const char* s : {"", "Softmax", "softmax:1", "window", "window:", "window:0", "window:-1", "window:+5",
                        "window: 5", "window:5 ", "window:5:", "window:1e3", "window:2147483648",
                        "window:99999999999999999999", "sink_window", "sink_window:4", "sink_window:a:5",
                        "sink_window:4:0", "sink_window:-1:5", "sink_window:4:5:6", "static:1", "linear:3",
                        "pruned:", ":", "window::5"}) {
    INFO("'" << s << "'");
    CHECK_THROWS_AS(HeadSpec::parse(s), hw::Error);
  }
  CHECK_THROWS_WITH(HeadSpec::parse("window:0"), Catch::Contains("window:0") && Catch::Contains(">= 1"));
}

TEST_CASE("HeadPlan: uniform, counts, JSON round trip, validation") {
  HeadPlan p = HeadPlan::uniform(2, 3);
  CHECK(p.all_softmax());
  CHECK(p.count(HeadKind::Softmax) == 6);
  p.layers[1][2] = HeadSpec::parse("window:32");
  p.layers[0][0] = HeadSpec::parse("pruned");
  CHECK_FALSE(p.all_softmax());
  CHECK(p.count(HeadKind::Window) == 1);
  CHECK(p.count(HeadKind::Pruned) == 1);
  const nlohmann::json j = p.to_json();
  CHECK(j == nlohmann::json::parse(R"([["pruned","softmax","softmax"],["softmax","softmax","window:32"]])"));
  CHECK(HeadPlan::from_json(j) == p);
  CHECK_NOTHROW(p.validate(2, 3));
  CHECK_THROWS_WITH(p.validate(3, 3), Catch::Contains("2 layers") && Catch::Contains("3"));
  CHECK_THROWS_WITH(p.validate(2, 4), Catch::Contains("layer 0"));
  HeadPlan bad = p;
  bad.layers[1][0].kind = HeadKind::Window;  // window 0 set in code, not parsed
  CHECK_THROWS_WITH(bad.validate(2, 3), Catch::Contains("layer 1 head 0"));
  CHECK_THROWS_AS(HeadPlan::from_json(nlohmann::json::parse(R"({"a":1})")), hw::Error);
  CHECK_THROWS_WITH(HeadPlan::from_json(nlohmann::json::parse(R"([["softmax"], "softmax"])")),
                    Catch::Contains("layer 1"));
  CHECK_THROWS_WITH(HeadPlan::from_json(nlohmann::json::parse(R"([["softmax", 3]])")),
                    Catch::Contains("layer 0 head 1"));
  CHECK_THROWS_WITH(HeadPlan::from_json(nlohmann::json::parse(R"([["softmax", "windw:3"]])")),
                    Catch::Contains("windw:3"));
}

TEST_CASE("LayerLayout: slots for a mixed GQA plan") {
  // groups of 2 query heads: {softmax, static} {pruned, linear} {pruned, pruned}
  const LayerPlan plan = {HeadSpec::parse("softmax"), HeadSpec::parse("static"), HeadSpec::parse("pruned"),
                          HeadSpec::parse("linear"),  HeadSpec::parse("pruned"), HeadSpec::parse("pruned")};
  const LayerLayout L = LayerLayout::build(plan, 6, 3, 8);
  CHECK(L.q_slot == std::vector<int>{0, -1, -1, 1, -1, -1});
  CHECK(L.k_slot == std::vector<int>{0, 1, -1});
  CHECK(L.v_slot == std::vector<int>{0, 1, -1});
  CHECK(L.o_slot == std::vector<int>{0, 1, -1, 2, -1, -1});
  CHECK(L.n_q == 2);
  CHECK(L.n_k == 2);
  CHECK(L.n_v == 2);
  CHECK(L.n_o == 3);
  CHECK(L.qkv_width() == 48);
  CHECK(L.out_width() == 24);
  CHECK(L.q_col(3) == 8);
  CHECK(L.k_col(0) == 16);
  CHECK(L.k_col(1) == 24);
  CHECK(L.v_col(0) == 32);
  CHECK(L.v_col(1) == 40);
  CHECK(L.out_col(3) == 16);
  CHECK(L.kv_head_of(5) == 2);
}

TEST_CASE("LayerLayout: static-only group has V but no K, MQA and MHA") {
  const LayerPlan plan = {HeadSpec::parse("static"), HeadSpec::parse("static"), HeadSpec::parse("pruned"),
                          HeadSpec::parse("static")};
  const LayerLayout mqa = LayerLayout::build(plan, 4, 1, 16);
  CHECK(mqa.n_q == 0);
  CHECK(mqa.n_k == 0);
  CHECK(mqa.n_v == 1);
  CHECK(mqa.n_o == 3);
  CHECK(mqa.v_col(0) == 0);
  CHECK(mqa.o_slot == std::vector<int>{0, 1, -1, 2});

  const LayerPlan mixed = {HeadSpec::parse("window:4"), HeadSpec::parse("pruned"), HeadSpec::parse("static"),
                           HeadSpec::parse("linear")};
  const LayerLayout mha = LayerLayout::build(mixed, 4, 4, 2);
  CHECK(mha.q_slot == std::vector<int>{0, -1, -1, 1});
  CHECK(mha.k_slot == std::vector<int>{0, -1, -1, 1});
  CHECK(mha.v_slot == std::vector<int>{0, -1, 1, 2});
  CHECK(mha.o_slot == std::vector<int>{0, -1, 1, 2});
  CHECK(mha.qkv_width() == (2 + 2 + 3) * 2);
  CHECK(mha.v_col(3) == (2 + 2 + 2) * 2);

  const LayerLayout gqa = LayerLayout::build(mixed, 4, 2, 2);  // groups {window, pruned} {static, linear}
  CHECK(gqa.k_slot == std::vector<int>{0, 1});
  CHECK(gqa.v_slot == std::vector<int>{0, 1});
  CHECK(gqa.qkv_width() == (2 + 2 + 2) * 2);
}

TEST_CASE("LayerLayout rejects bad shapes") {
  const LayerPlan four(4, HeadSpec{});
  CHECK_THROWS_AS(LayerLayout::build(four, 4, 3, 8), hw::Error);
  CHECK_THROWS_AS(LayerLayout::build(four, 4, 0, 8), hw::Error);
  CHECK_THROWS_AS(LayerLayout::build(four, 5, 5, 8), hw::Error);
  CHECK_THROWS_AS(LayerLayout::build(four, 4, 2, 0), hw::Error);
}
