// Fuzz target `gate_evidence`: a public report (gates with their evidence) as it is read back from
// a stored candidate row and turned into the next prompt's feedback (feedback/feedback.h) and the
// loop's freeze keys (speed-up, its interval, the noise-floor decision). Rows can be edited, so
// the report is untrusted. Input: REPORT_JSON \0 KERNEL_SOURCE.
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "agent/loop_record.h"
#include "feedback/feedback.h"
#include "fuzz/fuzz_target.h"

KLOOP_FUZZ_TARGET(gate_evidence) {
  using nlohmann::json;
  const auto parts = kloop::fuzz::split_input(kloop::fuzz::text_of(data, size), 2);
  const json j = json::parse(parts[0], nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return 0;
  kloop::evaluator::PublicReport report;
  try {
    report = kloop::evaluator::PublicReport::from_json(j);
  } catch (const std::invalid_argument&) { // documented: names the bad field
    return 0;
  }
  (void)kloop::agent::speedup_of(report);
  (void)kloop::agent::speedup_interval_of(report);
  (void)kloop::agent::clears_noise_floor(report);
  kloop::feedback::FeedbackOptions options;
  options.kernel_source = parts[1];
  const auto payload = kloop::feedback::build_feedback(report, options);
  (void)payload.render();
  (void)payload.to_json().dump(-1, ' ', false, json::error_handler_t::replace);
  (void)report.to_json().dump(-1, ' ', false, json::error_handler_t::replace);
  return 0;
}
