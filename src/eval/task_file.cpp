// Task formats (task_file.hpp). Each format's prompt and field mapping is the harness's task
// definition for that dataset (lm-evaluation-harness 0.4.x, paths under lm_eval/tasks/):
//   hellaswag   hellaswag/hellaswag.yaml + utils.py: query = preprocess(activity_label + ": " +
//               ctx_a + " " + ctx_b.capitalize()), choices = preprocess(endings), label =
//               int(label); preprocess = strip, " [title]" -> ". ", drop [..], "  " -> " ".
//   piqa        piqa/piqa.yaml: "Question: {goal}\nAnswer:", choices [sol1, sol2], label.
//   arc         arc/arc_easy.yaml (and arc_challenge.yaml): "Question: {question}\nAnswer:",
//               choices choices.text, label = choices.label.index(answerKey).
//   boolq       super_glue/boolq/default.yaml: "{passage}\nQuestion: {question}?\nAnswer:",
//               choices ["no", "yes"], label (or google/boolq's boolean "answer").
//   sst2        glue/sst2/default.yaml: "{sentence}\nQuestion: Is this sentence positive or
//               negative?\nAnswer:", choices ["negative", "positive"], label.
//   winogrande  winogrande/default.yaml + preprocess_winogrande.py: partial evaluation: context i
//               = sentence[:blank] + option i, continuation = sentence[blank+1:].strip(), label
//               = {"1": 0, "2": 1}[answer]; the choices (for acc_norm) are the contexts.
//   mmlu        mmlu/default/_default_template_yaml + _generate_configs.py: description "The
//               following are multiple choice questions (with answers) about {subject with _
//               as spaces}.\n\n" (when the row has a subject) + "{question.strip()}\nA. {c0}\nB.
//               {c1}\nC. {c2}\nD. {c3}\nAnswer:", choices ["A", "B", "C", "D"], label = answer.
//   generic     {"context", "choices", "label"}: context as given, choices as given.
// Every continuation is target_delimiter (" ") + the choice (lm_eval/api/task.py
// construct_requests); the tokenizer side moves a context's trailing spaces over (eval_tokenizer).
#include "headwise/eval/task_file.hpp"

#include <fstream>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/eval/py_text.hpp"

namespace hw::eval {

namespace {

using nlohmann::json;

std::string str_field(const json& doc, const char* key, const std::string& where) {
  check(doc.contains(key), where + ": missing key '" + key + "'");
  check(doc[key].is_string(), where + ": '" + key + "' is not a string");
  return doc[key].get<std::string>();
}

std::vector<std::string> str_list(const json& v, const std::string& what, const std::string& where) {
  check(v.is_array(), where + ": " + what + " is not a list");
  std::vector<std::string> out;
  for (const json& e : v) {
    check(e.is_string(), where + ": " + what + " holds a value that is not a string");
    out.push_back(e.get<std::string>());
  }
  return out;
}

// An integer label given as a JSON integer or a string of digits (HellaSwag's "label": "3").
int64_t int_label(const json& doc, const char* key, const std::string& where) {
  check(doc.contains(key), where + ": missing key '" + key + "'");
  const json& v = doc[key];
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    check(!s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos,
          where + ": '" + key + "' is \"" + s.substr(0, 40) + "\", not a label number");
    return std::stoll(s);
  }
  fail(where + ": '" + key + "' is not an integer label");
}

std::string hellaswag_preprocess(const std::string& text) {  // hellaswag/utils.py preprocess
  std::string t = py_strip(text);
  t = py_replace(t, " [title]", ". ");
  t = remove_bracketed(t);
  return py_replace(t, "  ", " ");
}

// The usual shape: one prompt, continuation " " + choice.
McExample shared_context(std::string context, std::vector<std::string> choices, int64_t label,
                         const std::string& where) {
  check(!choices.empty(), where + ": the choice list is empty");
  check(label >= 0 && label < int64_t(choices.size()),
        where + ": label " + std::to_string(label) + " is outside the " + std::to_string(choices.size()) +
            " choices");
  McExample ex;
  for (size_t i = 0; i < choices.size(); ++i) {
    check(!choices[i].empty(), where + ": choice " + std::to_string(i) + " is empty");
    ex.contexts.push_back(context);
    ex.continuations.push_back(" " + choices[i]);
  }
  ex.choices = std::move(choices);
  ex.label = int(label);
  return ex;
}

McExample hellaswag(const json& d, const std::string& w) {
  const std::string ctx = str_field(d, "ctx_a", w) + " " + py_capitalize(str_field(d, "ctx_b", w));
  const std::string query = hellaswag_preprocess(str_field(d, "activity_label", w) + ": " + ctx);
  check(d.contains("endings"), w + ": missing key 'endings'");
  std::vector<std::string> choices;
  for (const std::string& e : str_list(d["endings"], "'endings'", w)) choices.push_back(hellaswag_preprocess(e));
  return shared_context(query, choices, int_label(d, "label", w), w);
}

McExample piqa(const json& d, const std::string& w) {
  return shared_context("Question: " + str_field(d, "goal", w) + "\nAnswer:",
                        {str_field(d, "sol1", w), str_field(d, "sol2", w)}, int_label(d, "label", w), w);
}

McExample arc(const json& d, const std::string& w) {
  check(d.contains("choices") && d["choices"].is_object(), w + ": 'choices' is not an object {text, label}");
  const json& c = d["choices"];
  check(c.contains("text") && c.contains("label"), w + ": 'choices' needs 'text' and 'label'");
  const std::vector<std::string> text = str_list(c["text"], "choices.text", w);
  const std::vector<std::string> labels = str_list(c["label"], "choices.label", w);
  check(text.size() == labels.size(), w + ": choices.text and choices.label differ in length");
  const std::string key = str_field(d, "answerKey", w);
  int64_t label = -1;
  for (size_t i = 0; i < labels.size() && label < 0; ++i)
    if (labels[i] == key) label = int64_t(i);
  check(label >= 0, w + ": answerKey \"" + key.substr(0, 40) + "\" is not one of choices.label");
  return shared_context("Question: " + str_field(d, "question", w) + "\nAnswer:", text, label, w);
}

McExample boolq(const json& d, const std::string& w) {
  int64_t label = 0;
  if (d.contains("label")) {
    label = int_label(d, "label", w);
  } else {
    check(d.contains("answer") && d["answer"].is_boolean(), w + ": needs an integer 'label' or a boolean 'answer'");
    label = d["answer"].get<bool>() ? 1 : 0;
  }
  return shared_context(str_field(d, "passage", w) + "\nQuestion: " + str_field(d, "question", w) + "?\nAnswer:",
                        {"no", "yes"}, label, w);
}

McExample sst2(const json& d, const std::string& w) {
  return shared_context(str_field(d, "sentence", w) + "\nQuestion: Is this sentence positive or negative?\nAnswer:",
                        {"negative", "positive"}, int_label(d, "label", w), w);
}

McExample winogrande(const json& d, const std::string& w) {
  const std::string sentence = str_field(d, "sentence", w);
  const size_t blank = sentence.find('_');
  check(blank != std::string::npos, w + ": 'sentence' has no blank '_'");
  const std::string answer = str_field(d, "answer", w);
  check(answer == "1" || answer == "2", w + ": 'answer' is \"" + answer.substr(0, 40) + "\", not \"1\" or \"2\"");
  std::string rest(1, ' ');  // (built in two steps: " " + str trips a g++ 12 -Wrestrict false positive)
  rest += py_strip(std::string_view(sentence).substr(blank + 1));
  McExample ex;
  for (const char* key : {"option1", "option2"}) {
    ex.contexts.push_back(sentence.substr(0, blank) + str_field(d, key, w));
    ex.continuations.push_back(rest);
  }
  ex.choices = ex.contexts;
  ex.label = answer == "1" ? 0 : 1;
  return ex;
}

McExample mmlu(const json& d, const std::string& w) {
  check(d.contains("choices"), w + ": missing key 'choices'");
  const std::vector<std::string> c = str_list(d["choices"], "'choices'", w);
  check(c.size() == 4, w + ": MMLU needs 4 choices, got " + std::to_string(c.size()));
  int64_t label = 0;
  check(d.contains("answer"), w + ": missing key 'answer'");
  if (d["answer"].is_string() && d["answer"].get<std::string>().size() == 1 &&
      d["answer"].get<std::string>()[0] >= 'A' && d["answer"].get<std::string>()[0] <= 'D')
    label = d["answer"].get<std::string>()[0] - 'A';
  else
    label = int_label(d, "answer", w);
  std::string description;
  if (d.contains("subject") && d["subject"].is_string() && !d["subject"].get<std::string>().empty())
    description = "The following are multiple choice questions (with answers) about " +
                  py_replace(d["subject"].get<std::string>(), "_", " ") + ".\n\n";
  const std::string text = description + py_strip(str_field(d, "question", w)) + "\nA. " + c[0] + "\nB. " + c[1] +
                           "\nC. " + c[2] + "\nD. " + c[3] + "\nAnswer:";
  return shared_context(text, {"A", "B", "C", "D"}, label, w);
}

McExample generic(const json& d, const std::string& w) {
  check(d.contains("choices"), w + ": missing key 'choices'");
  return shared_context(str_field(d, "context", w), str_list(d["choices"], "'choices'", w), int_label(d, "label", w), w);
}

bool has(const json& d, std::initializer_list<const char*> keys) {
  for (const char* k : keys)
    if (!d.contains(k)) return false;
  return true;
}

}  // namespace

const std::vector<std::string>& task_formats() {
  static const std::vector<std::string> f = {"generic", "hellaswag", "piqa", "arc", "boolq", "sst2", "winogrande", "mmlu"};
  return f;
}

std::string detect_format(const json& d) {
  if (!d.is_object()) return "";
  if (has(d, {"context", "choices", "label"})) return "generic";
  if (has(d, {"ctx_a", "ctx_b", "endings"})) return "hellaswag";
  if (has(d, {"goal", "sol1", "sol2"})) return "piqa";
  if (has(d, {"question", "choices", "answerKey"})) return "arc";
  if (has(d, {"passage", "question"})) return "boolq";
  if (has(d, {"sentence", "option1", "option2"})) return "winogrande";
  if (has(d, {"sentence", "label"})) return "sst2";
  if (has(d, {"question", "choices", "answer"})) return "mmlu";
  return "";
}

McExample example_from_json(const json& d, const std::string& format, const std::string& where) {
  check(d.is_object(), where + ": not a JSON object");
  if (format == "generic") return generic(d, where);
  if (format == "hellaswag") return hellaswag(d, where);
  if (format == "piqa") return piqa(d, where);
  if (format == "arc") return arc(d, where);
  if (format == "boolq") return boolq(d, where);
  if (format == "sst2") return sst2(d, where);
  if (format == "winogrande") return winogrande(d, where);
  if (format == "mmlu") return mmlu(d, where);
  fail(where + ": unknown task format '" + format + "'");
}

TaskFile read_task_file(const std::string& path, int64_t limit) {
  std::ifstream in(path, std::ios::binary);
  check(in.is_open(), path + ": cannot open the task file");
  TaskFile tf;
  tf.path = path;
  std::string line;
  int64_t lineno = 0;
  while ((limit <= 0 || int64_t(tf.examples.size()) < limit) && std::getline(in, line)) {
    ++lineno;
    const std::string where = path + ":" + std::to_string(lineno);
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json doc;
    try {
      doc = parse_json(line, where);  // bounded nesting, errors by position
    } catch (const Error& e) {
      fail(std::string(e.what()) + " (the task file must be JSONL: one JSON object per line)");
    }
    check(doc.is_object(), where + ": not a JSON object");
    if (tf.format.empty()) {
      tf.format = detect_format(doc);
      if (tf.format.empty()) {
        std::string keys;
        for (auto it = doc.begin(); it != doc.end() && keys.size() < 120; ++it) keys += (keys.empty() ? "" : ", ") + it.key();
        fail(where + ": unknown task format (keys: " + keys +
             "); known: generic {context, choices, label}, hellaswag, piqa, arc, boolq, sst2, winogrande, mmlu");
      }
    }
    McExample ex = example_from_json(doc, tf.format, where);
    ex.line = lineno;
    tf.examples.push_back(std::move(ex));
  }
  check(!in.bad(), path + ": read error");
  check(!tf.examples.empty(), path + ": no examples");
  return tf;
}

}  // namespace hw::eval
