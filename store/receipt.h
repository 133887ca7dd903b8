// Promotion receipts: the seed's receipt template filled from the store, serialised with RFC 8785
// (store/jcs.h), hashed with SHA-256 and signed with Ed25519 (libsodium) in a separate approval
// envelope {canonical_payload_sha256, signature, signing_key_id}. A payload field that the store
// cannot fill stays null and blocks signing. Keys: a secret key file (mode 0600, JSON) and a key
// registry {key_id: public_key_hex}; key id = first 16 hex characters of sha256(public key bytes).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kloop::store {

class Store;
struct SessionDetail;

// An Ed25519 key pair, hex encoded (public 32 bytes, secret 64 bytes).
struct KeyPair {
  std::string key_id, public_hex, secret_hex;
};

KeyPair generate_keypair();
std::string key_id_of(const std::string& public_hex); // throws StoreError on bad hex
// Writes {"key_id","public_key","secret_key"} with mode 0600 (refuses to overwrite).
void write_secret_key(const std::string& path, const KeyPair& kp);
// Reads a key file; throws StoreError naming the file and the field when malformed, and naming
// the file and the fix (`chmod 600 FILE`) when its mode lets group or others read or write it. A
// `key_id` field, when present, must be [A-Za-z0-9._-]+ and the id of its public key.
KeyPair read_secret_key(const std::string& path);

// The receipt payload for session `d` (template fields of the seed); `manifest` is the frozen
// candidate's manifest.json (null when none). reviewer/key_id fill approval_identity; nullopt
// leaves them null. Every field comes from the store: the session row, the frozen candidate's gate
// evidence, tool calls, artifacts and telemetry, its sealed-holdout run and commitment ("holdout":
// commitment_sha256, suite_version, status, commitment_verified, report_uri_and_sha256, retired;
// status not_run and null evidence when it has no run), the promotion record (seed,
// "Preserve a promotion receipt"), and "row_chain": {links, head_sha256} of d.chain_head (a
// string saying so for a session recorded before row chaining; store/chain.h).
nlohmann::json build_receipt_payload(const SessionDetail& d, const nlohmann::json& manifest,
                                     const std::optional<std::string>& reviewer,
                                     const std::optional<std::string>& key_id);

// The parsed manifest.json of d.best_candidate() (null when none or unparsable); throws
// StoreError when its blob is missing or altered.
nlohmann::json receipt_manifest(const Store& store, const SessionDetail& d);

// Dotted paths of every null field in `payload` ("target.gpu_uuid", list elements as
// "sanitizers.commands_and_report_hashes[0].exit_code"), in document order.
std::vector<std::string> null_fields(const nlohmann::json& payload);

// Dotted paths of the rollout fields of `payload` that are missing, not strings or blank
// ("rollout.revalidation_policy"); a receipt with any is not signable for deployment.
std::vector<std::string> empty_rollout_fields(const nlohmann::json& payload);

// {"payload": payload, "approval": {canonical_payload_sha256, signature, signing_key_id}}.
// Throws StoreError naming the empty rollout fields when any (rollout first), else listing the
// null fields when any, else when the payload says "promoted" next to a correctness, sanitizer,
// benchmark or holdout status other than "pass", a holdout commitment not verified or a holdout
// suite not retired (a self-contradicting record).
nlohmann::json sign_payload(const nlohmann::json& payload, const KeyPair& key);

// Builds, signs and records (blob + receipts row, one step) the receipt of session `id`. Throws
// NotPromoted, recording nothing, when its latest promotion decision is not `promoted` (or there
// is none); StoreError when the session is recorded as promoted but its promoted
// candidate's verdict or any of its recorded gates is not pass, and for sign_payload's reasons;
// DamagedStore (checked first) when a status/verdict/decision code it reads is unknown, or a blob
// the payload names (candidate source and manifest, loaded cubin, case results, sanitizer reports,
// raw benchmark samples, holdout report) is missing or does not re-hash to its name.
nlohmann::json sign_session_receipt(Store& store, std::int64_t id, const KeyPair& key,
                                    const std::string& reviewer);

struct ReceiptCheck {
  bool ok = false;
  std::string message; // "receipt verifies: key K, payload sha256 H" or the precise failure
};

// Verifies `receipt` against `registry` ({key_id: public_key_hex}). Never throws for bad input:
// a malformed receipt is a failed check with a message naming the field.
ReceiptCheck verify_receipt(const nlohmann::json& receipt, const nlohmann::json& registry);

} // namespace kloop::store
