// Fuzz target `manifest`: a candidate's manifest.json as the contract gate reads it
// (op::parse_manifest against weighted_rmsnorm/1's declaration, formats 1 and 2), and as the
// RMSNorm-only readers (torch export) read it (rmsnorm::parse_manifest, through
// kernels/json_read.h). Input: MANIFEST \0 SOURCE (the source part, kept so the checked-in corpus
// still reads, is unused since entry points are decided from the compiled module). Bad input is a
// list of field errors, never an exception; an accepted manifest must print its dispatch
// predicate.
#include "fuzz/fuzz_target.h"
#include "kernels/json_read.h"
#include "kernels/manifest.h"
#include "kernels/rmsnorm/manifest.h"
#include "kernels/rmsnorm/operator.h"

KLOOP_FUZZ_TARGET(manifest) {
  const auto parts = kloop::fuzz::split_input(kloop::fuzz::text_of(data, size), 2);
  const auto parsed = kloop::rmsnorm::parse_manifest(parts[0]);
  if (parsed.manifest) {
    (void)kloop::rmsnorm::dispatch_predicate_text(*parsed.manifest);
    if (!parsed.errors.empty()) __builtin_trap(); // a manifest is accepted only without errors
  } else if (parsed.errors.empty()) {
    __builtin_trap(); // a refusal names at least one field
  }
  const kloop::op::Declaration& decl = kloop::rmsnorm::declaration();
  const auto generic = kloop::op::parse_manifest(decl, parts[0]);
  if (generic.manifest) {
    (void)kloop::op::dispatch_predicate_text(decl, *generic.manifest);
    if (!generic.errors.empty() || generic.manifest->variants.empty()) __builtin_trap();
  } else if (generic.errors.empty()) {
    __builtin_trap();
  }
  (void)kloop::read_json(parts[0]);
  return 0;
}
