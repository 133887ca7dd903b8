// Fuzz target `tool_output`: text that tools write about a candidate, as the gates parse it: the
// NVRTC log (ptxas resources, the diagnostics fed back), the PTX, the SASS summary, a
// compute-sanitizer report and ncu's CSV. Input: one byte choosing the parser, then the text.
#include "evaluator/build.h"
#include "evaluator/ncu.h"
#include "evaluator/sanitizer.h"
#include "evaluator/static_inspection.h"
#include "fuzz/fuzz_target.h"

KLOOP_FUZZ_TARGET(tool_output) {
  if (size == 0) return 0;
  const std::string_view text = kloop::fuzz::text_of(data + 1, size - 1);
  switch (data[0] % 6) {
  case 0:
    (void)kloop::evaluator::parse_ptxas_report(text);
    (void)kloop::evaluator::reduce_diagnostics(text);
    break;
  case 1:
    (void)kloop::evaluator::parse_ptx_entries(text);
    break;
  case 2:
    (void)kloop::evaluator::parse_sass_summary(text).dump(-1, ' ', false,
                                                          nlohmann::json::error_handler_t::replace);
    break;
  case 3:
    for (const char* tool : {"memcheck", "racecheck", "initcheck", "synccheck"})
      (void)kloop::evaluator::sanitizer::parse_report(tool, text);
    break;
  case 4:
    (void)kloop::evaluator::ncu::parse_csv(text);
    break;
  default:
    (void)kloop::evaluator::sanitizer::parse_version(text);
    (void)kloop::evaluator::redact_paths(text, {{"/tmp/kloop-build-x/", ""}});
  }
  return 0;
}
