// Fuzz target `receipt`: `kloop receipt verify FILE --keys REGISTRY`: a receipt and a key registry
// from anyone, checked against each other (store::verify_receipt: JCS canonical form, SHA-256,
// Ed25519). Input: RECEIPT_JSON \0 REGISTRY_JSON. A receipt verifies only with a valid signature,
// which fuzzing cannot forge: every input must be refused with a message, never crash.
#include <nlohmann/json.hpp>

#include "fuzz/fuzz_target.h"
#include "store/error.h"
#include "store/jcs.h"
#include "store/receipt.h"

KLOOP_FUZZ_TARGET(receipt) {
  using nlohmann::json;
  const auto parts = kloop::fuzz::split_input(kloop::fuzz::text_of(data, size), 2);
  const json receipt = json::parse(parts[0], nullptr, /*allow_exceptions=*/false);
  const json registry = json::parse(parts[1], nullptr, /*allow_exceptions=*/false);
  if (receipt.is_discarded() || registry.is_discarded()) return 0;
  const auto check = kloop::store::verify_receipt(receipt, registry);
  if (check.message.empty()) __builtin_trap(); // every verdict says why
  try {
    (void)kloop::store::jcs_canonicalize(receipt);
  } catch (const kloop::store::StoreError&) { // documented: a value JCS cannot represent
  }
  return 0;
}
