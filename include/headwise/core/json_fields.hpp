#pragma once
// Strict reading of JSON config sections: every key must be known, every value of the
// expected type; errors name the full key ("train.lr: expected a number, got \"abc\"").
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "headwise/core/error.hpp"

namespace hw {

class JsonFields {
 public:
  JsonFields(const nlohmann::json& obj, std::string section);
  // Read key into out if present; out keeps its default otherwise.
  void get(const char* key, int& out);
  void get(const char* key, int64_t& out);
  void get(const char* key, double& out);
  void get(const char* key, bool& out);
  void get(const char* key, std::string& out);
  const nlohmann::json* raw(const char* key);  // marks the key known; null if absent
  // Throws on any key not read by one of the calls above; `owner` (e.g. "method \"saf\"") is
  // named in the error when given.
  void finish(const std::string& owner = "") const;

 private:
  const nlohmann::json* find(const char* key);
  const nlohmann::json& obj_;
  std::string section_;
  std::set<std::string> known_;
};

// Parse a JSON config file (// and /* */ comments allowed); errors name the file.
nlohmann::json read_json_file(const std::string& path);

// Apply "section.key=value" to a config document (value parsed as JSON, else taken as a string);
// "section.a.b=value" sets key b of the object a (created when absent).
void apply_override(nlohmann::json& doc, const std::string& assignment);

}  // namespace hw
