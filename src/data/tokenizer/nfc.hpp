#pragma once
// Unicode Normalization Form C (what a tokenizer.json "normalizer": {"type": "NFC"} does before
// pre-tokenizing: Qwen 2's files have it). Tables: nfc_tables.cpp (scripts/gen_nfc_tables.py).
#include <string>
#include <string_view>

namespace hw::data {

// NFC of UTF-8 text: canonical decomposition (recursive; Hangul syllables by the algorithm),
// canonical ordering of combining marks, canonical composition (primary composites, with the
// blocking rule; Hangul L+V and LV+T). A byte that starts no valid UTF-8 sequence (see
// unicode::decode_char) passes through unchanged and acts as a starter that composes with
// nothing, so stray bytes stay single symbols as elsewhere in the tokenizer.
std::string nfc(std::string_view text);

}  // namespace hw::data
