#pragma once
// Multiple-choice task files (JSONL, one example per line) in the public formats of the Hugging
// Face hub, each turned into contexts, continuations and a label exactly as lm-evaluation-harness's
// task definition for it does (the template and field mapping per format are in task_file.cpp,
// with the harness file each comes from), plus the generic form
//   {"context": "...", "choices": ["...", ...], "label": k}.
// The format of a file is recognised from the keys of its first example; every line must then
// be an example of that format. Bad input throws hw::Error "FILE:LINE: ..." (one line).
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hw::eval {

// One example as the harness builds its requests (lm_eval/api/task.py ConfigurableTask):
// choice i is scored as log P(continuations[i] | contexts[i]) where, for the usual formats,
// every context is the same prompt and continuations[i] = " " + choice i (target_delimiter " ");
// for Winogrande (the harness's "multiple_input" partial evaluation) contexts[i] is the sentence
// up to the blank filled with option i and every continuation is " " + the rest of the sentence.
// choices[i] is the string whose length in characters normalises acc_norm (process_results:
// completion_len = len(choice) of doc_to_choice, i.e. without the delimiter).
struct McExample {
  std::vector<std::string> contexts;       // one per choice
  std::vector<std::string> continuations;  // one per choice
  std::vector<std::string> choices;        // doc_to_choice, for length normalisation
  int label = 0;                           // index of the correct choice
  int64_t line = 0;                        // 1-based line in the task file
};

// Known formats: "generic", "hellaswag", "piqa", "arc", "boolq", "sst2", "winogrande", "mmlu".
const std::vector<std::string>& task_formats();
// The format whose keys `doc` has; "" when none matches.
std::string detect_format(const nlohmann::json& doc);
// One example of `format` from a parsed line; throws hw::Error with `where` ("FILE:LINE") first.
McExample example_from_json(const nlohmann::json& doc, const std::string& format, const std::string& where);

struct TaskFile {
  std::string path, format;
  std::vector<McExample> examples;
};
// Reads the first `limit` examples (all when limit <= 0); blank lines are skipped. Refuses a file
// that cannot be read, a line that is not a JSON object, an unknown format, an example missing
// its format's keys, an empty choice list, an empty choice, a label outside the choices, and a
// file with no examples.
TaskFile read_task_file(const std::string& path, int64_t limit = 0);

}  // namespace hw::eval
