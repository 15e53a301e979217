// Head plans: text form of a head kind, the per-layer plan and the column layout it implies.
#include "headwise/attention/head_plan.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <limits>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"

namespace hw::attn {
namespace {

[[noreturn]] void bad_kind(const std::string& text) {
  std::string expected;
  for (int k = 0; k < kind_count(); ++k)
    expected += std::string(k ? ", " : "") + kind_info(static_cast<HeadKind>(k)).forms;
  fail("head plan: bad head kind '" + text_brief(text) + "' (expected " + expected + ")");
}

// Strict decimal: digits only (no sign, spaces or trailing characters), fits int32.
bool parse_int(const std::string& s, int32_t& out) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size() || v > std::numeric_limits<int32_t>::max()) return false;
  out = static_cast<int32_t>(v);
  return true;
}

std::vector<std::string> split_colon(const std::string& text) {
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == ':') parts.emplace_back();
    else parts.back().push_back(c);
  }
  return parts;
}

}  // namespace

HeadSpec HeadSpec::parse(const std::string& text) {
  const auto parts = split_colon(text);
  const std::string& name = parts[0];
  HeadSpec spec;
  if (parts.size() == 1) {  // a kind without parameters (or performer's default feature count)
    for (int k = 0; k < kind_count(); ++k) {
      const auto kind = static_cast<HeadKind>(k);
      if (name != kind_info(kind).name || kind == HeadKind::Window || kind == HeadKind::SinkWindow) continue;
      spec.kind = kind;
      if (kind == HeadKind::Performer) spec.features = HeadSpec::kPerformerFeatures;
      return spec;
    }
    bad_kind(text);
  }
  if (name == "performer" && parts.size() == 2) {
    spec.kind = HeadKind::Performer;
    if (!parse_int(parts[1], spec.features) || !spec.invalid_reason().empty())
      fail("head plan: bad feature count in '" + text_brief(text) + "' (expected an integer in 1.." +
           std::to_string(HeadSpec::kMaxPerformerFeatures) + ")");
    return spec;
  }
  if (name == "window" && parts.size() == 2) {
    spec.kind = HeadKind::Window;
    if (!parse_int(parts[1], spec.window) || !spec.invalid_reason().empty())
      fail("head plan: bad window in '" + text_brief(text) + "' (expected an integer >= 1)");
    return spec;
  }
  if (name == "sink_window" && parts.size() == 3) {
    spec.kind = HeadKind::SinkWindow;
    if (!parse_int(parts[1], spec.sink))
      fail("head plan: bad sink in '" + text_brief(text) + "' (expected an integer >= 0)");
    if (!parse_int(parts[2], spec.window))
      fail("head plan: bad window in '" + text_brief(text) + "' (expected an integer >= 1)");
    if (const std::string why = spec.invalid_reason(); !why.empty()) fail("head plan: '" + text_brief(text) + "': " + why);
    return spec;
  }
  bad_kind(text);
}

std::string HeadSpec::str() const {
  switch (kind) {
    case HeadKind::Window: return "window:" + std::to_string(window);
    case HeadKind::SinkWindow: return "sink_window:" + std::to_string(sink) + ":" + std::to_string(window);
    case HeadKind::Performer:
      return features == kPerformerFeatures ? "performer" : "performer:" + std::to_string(features);
    default: break;  // kinds without parameters: their name
  }
  const char* name = kind_info(kind).name;
  return name ? name : "?";
}

std::string HeadSpec::invalid_reason() const {
  const bool windowed = kind == HeadKind::Window || kind == HeadKind::SinkWindow;
  if (windowed && window < 1) return "window " + std::to_string(window) + " must be >= 1";
  if (kind == HeadKind::SinkWindow && sink < 0) return "sink " + std::to_string(sink) + " must be >= 0";
  if (kind == HeadKind::Performer && (features < 1 || features > kMaxPerformerFeatures))
    return "performer features " + std::to_string(features) + " must be in 1.." + std::to_string(kMaxPerformerFeatures);
  return "";
}

HeadPlan HeadPlan::uniform(int n_layer, int n_head, HeadSpec spec) {
  check(n_layer >= 0 && n_head >= 0, "head plan: negative shape");
  HeadPlan plan;
  plan.layers.assign(static_cast<size_t>(n_layer), LayerPlan(static_cast<size_t>(n_head), spec));
  return plan;
}

void HeadPlan::validate(int n_layer, int n_head) const {
  if (layers.size() != static_cast<size_t>(n_layer))
    fail("head plan: " + std::to_string(layers.size()) + " layers, model has " + std::to_string(n_layer));
  for (size_t l = 0; l < layers.size(); ++l) {
    if (layers[l].size() != static_cast<size_t>(n_head))
      fail("head plan: layer " + std::to_string(l) + " has " + std::to_string(layers[l].size()) +
           " heads, model has " + std::to_string(n_head));
    for (size_t h = 0; h < layers[l].size(); ++h) {
      const HeadSpec& s = layers[l][h];
      if (const std::string why = s.invalid_reason(); !why.empty())
        fail("head plan: layer " + std::to_string(l) + " head " + std::to_string(h) + " is invalid ('" +
             s.str() + "': " + why + ")");
    }
  }
}

bool HeadPlan::all_softmax() const {
  for (const auto& l : layers)
    for (const auto& s : l)
      if (s.kind != HeadKind::Softmax) return false;
  return true;
}

int HeadPlan::count(HeadKind kind) const {
  int n = 0;
  for (const auto& l : layers)
    for (const auto& s : l) n += s.kind == kind;
  return n;
}

nlohmann::json HeadPlan::to_json() const {
  nlohmann::json j = nlohmann::json::array();
  for (const auto& l : layers) {
    nlohmann::json row = nlohmann::json::array();
    for (const auto& s : l) row.push_back(s.str());
    j.push_back(std::move(row));
  }
  return j;
}

HeadPlan HeadPlan::from_json(const nlohmann::json& j) {
  if (!j.is_array()) fail("head plan: expected an array of layers, got " + std::string(j.type_name()));
  HeadPlan plan;
  for (size_t l = 0; l < j.size(); ++l) {
    const auto& row = j[l];
    if (!row.is_array()) fail("head plan: layer " + std::to_string(l) + " is not an array of strings");
    LayerPlan lp;
    for (size_t h = 0; h < row.size(); ++h) {
      if (!row[h].is_string())
        fail("head plan: layer " + std::to_string(l) + " head " + std::to_string(h) + " is not a string");
      lp.push_back(HeadSpec::parse(row[h].get<std::string>()));
    }
    plan.layers.push_back(std::move(lp));
  }
  return plan;
}

LayerLayout LayerLayout::build(const LayerPlan& plan, int n_head, int n_kv_head, int head_dim) {
  check(n_head > 0 && n_kv_head > 0 && n_head % n_kv_head == 0,
        "layer layout: n_head " + std::to_string(n_head) + " is not a positive multiple of n_kv_head " +
            std::to_string(n_kv_head));
  check(head_dim > 0, "layer layout: head_dim must be positive, got " + std::to_string(head_dim));
  check(plan.size() == static_cast<size_t>(n_head), "layer layout: plan has " + std::to_string(plan.size()) +
                                                        " heads, layer has " + std::to_string(n_head));
  LayerLayout L;
  L.n_head = n_head;
  L.n_kv_head = n_kv_head;
  L.head_dim = head_dim;
  L.q_slot.assign(static_cast<size_t>(n_head), -1);
  L.o_slot.assign(static_cast<size_t>(n_head), -1);
  L.k_slot.assign(static_cast<size_t>(n_kv_head), -1);
  L.v_slot.assign(static_cast<size_t>(n_kv_head), -1);
  std::vector<bool> k_used(static_cast<size_t>(n_kv_head), false), v_used(static_cast<size_t>(n_kv_head), false);
  for (int h = 0; h < n_head; ++h) {
    const HeadSpec& s = plan[static_cast<size_t>(h)];
    const auto g = static_cast<size_t>(L.kv_head_of(h));
    if (s.reads_qk()) {
      L.q_slot[static_cast<size_t>(h)] = L.n_q++;
      k_used[g] = true;
    }
    if (s.reads_v()) {
      v_used[g] = true;
      L.o_slot[static_cast<size_t>(h)] = L.n_o++;
    }
  }
  for (size_t g = 0; g < static_cast<size_t>(n_kv_head); ++g) {
    if (k_used[g]) L.k_slot[g] = L.n_k++;
    if (v_used[g]) L.v_slot[g] = L.n_v++;
  }
  return L;
}

}  // namespace hw::attn
