#include "headwise/core/error.hpp"
#include "headwise/data/tokenizer.hpp"

namespace hw::data {

std::vector<uint16_t> encode_bytes(const std::string& text) {
  std::vector<uint16_t> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
  return out;
}

std::string decode_bytes(const std::vector<uint16_t>& tokens) {
  std::string out(tokens.size(), '\0');
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] >= kByteVocab)
      fail("token " + std::to_string(tokens[i]) + " at position " + std::to_string(i) +
           " is outside the byte vocabulary (256)");
    out[i] = static_cast<char>(static_cast<unsigned char>(tokens[i]));
  }
  return out;
}

}  // namespace hw::data
