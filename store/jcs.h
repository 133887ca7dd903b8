// RFC 8785 JSON Canonicalization Scheme (JCS): the byte string receipts are hashed and signed
// over. Object members sorted by the UTF-16 code units of their names, no whitespace, strings
// with the minimal JSON escapes (other characters as raw UTF-8), numbers formatted as
// ECMAScript's Number.prototype.toString (shortest round-trip digits, RFC 8785 section 3.2.2.3).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kloop::store {

// Canonical bytes of `value`. Throws StoreError for NaN or infinite numbers, integers whose
// magnitude exceeds 2^53 (not exactly representable as IEEE double, RFC 8785 section 3.2.2.3),
// invalid UTF-8 and binary values.
std::string jcs_canonicalize(const nlohmann::json& value);

// ECMAScript Number.prototype.toString of a finite double ("1e+21", "0.000001", "5e-324").
std::string jcs_number(double v);

} // namespace kloop::store
