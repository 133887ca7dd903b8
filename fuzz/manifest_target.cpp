// Fuzz target `manifest`: a candidate's manifest.json as the contract gate and the torch export
// read it (op::parse_manifest against weighted_rmsnorm/1's declaration, formats 1 and 2, through
// kernels/json_read.h). Input: MANIFEST \0 SOURCE (the source part, kept so the checked-in corpus
// still reads, is unused since entry points are decided from the compiled module). Bad input is a
// list of field errors, never an exception; an accepted manifest must print its dispatch
// predicate.
#include "fuzz/fuzz_target.h"
#include "kernels/json_read.h"
#include "kernels/manifest.h"
#include "kernels/rmsnorm/operator.h"

KLOOP_FUZZ_TARGET(manifest) {
  const auto parts = kloop::fuzz::split_input(kloop::fuzz::text_of(data, size), 2);
  const kloop::op::Declaration& decl = kloop::rmsnorm::declaration();
  const auto generic = kloop::op::parse_manifest(decl, parts[0]);
  if (generic.manifest) {
    (void)kloop::op::dispatch_predicate_text(decl, *generic.manifest);
    if (!generic.errors.empty() || generic.manifest->variants.empty()) __builtin_trap();
  } else if (generic.errors.empty()) {
    __builtin_trap(); // a refusal names at least one field
  }
  (void)kloop::read_json(parts[0]);
  return 0;
}
