// Reading JSON text that came from outside kloop (a model's manifest, a worker's result file)
// without exceptions. nlohmann::json::parse throws out_of_range (406) for a number beyond the
// range of a double ("1e999") even where a caller catches only parse errors, and its message
// names a byte offset, not the field; read_json returns every failure as a value and names the
// JSON path of an overflowing number ("launch.block_threads").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kloop {

struct JsonRead {
  std::optional<nlohmann::json> value; // the document; nullopt when it did not read
  std::string error;                   // why not ("" when it did): the parser's message
  // The text follows the JSON grammar (RFC 8259) up to a number that overflows a double (the
  // grammar allows any number of digits; nlohmann, like most readers, cannot hold it). `path` is
  // that number's JSON path, "" for a top-level number.
  bool number_overflow = false;
  std::string path;
  bool top_level_object = false; // the text opens with an object (whether or not it read)
  // The JSON path of the first member whose key its object already holds ("launch.grid"), ""
  // when every key is unique. The document still reads (RFC 8259 leaves duplicate names
  // undefined; nlohmann keeps the last value), so a caller that must not guess rejects it.
  std::string duplicate_key;
};

// Parses all of `text` as one JSON value (nlohmann's grammar: no comments, no trailing commas).
JsonRead read_json(std::string_view text);

} // namespace kloop
