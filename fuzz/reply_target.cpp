// Fuzz target `reply`: a provider's HTTP body as the providers read it (the OpenAI and Anthropic
// JSON: reply text, usage, error message), then the reply text as the loop reads it (the fenced
// cuda and json blocks: agent::parse_reply, the format gate) and the manifest block as the
// contract gate reads it. The whole input is also parsed directly as a reply text.
#include "agent/anthropic_provider.h"
#include "agent/openai_provider.h"
#include "agent/reply_parser.h"
#include "fuzz/fuzz_target.h"
#include "kernels/manifest.h"
#include "kernels/rmsnorm/operator.h"

namespace {

void reply_text(const std::string& text) {
  const auto parsed = kloop::agent::parse_reply(text);
  const auto gate = kloop::agent::format_gate_result(parsed, text.size());
  (void)gate.evidence.dump();
  if (parsed.ok)
    (void)kloop::op::parse_manifest(kloop::rmsnorm::declaration(), parsed.manifest_text);
}

} // namespace

KLOOP_FUZZ_TARGET(reply) {
  const std::string body(kloop::fuzz::text_of(data, size));
  for (const auto& api :
       {kloop::agent::openai_parse_reply(body), kloop::agent::anthropic_parse_reply(body)}) {
    if (api.ok) reply_text(api.text);
    // Usage is reported, absent or invalid with its problem named; known counts are plausible.
    using kloop::agent::UsageStatus;
    if (api.usage.status == UsageStatus::kInvalid && api.usage.problem.empty()) __builtin_trap();
    if (api.usage.known() && (api.usage.input_tokens < 0 || api.usage.output_tokens < 0 ||
                              api.usage.input_tokens > kloop::agent::kMaxPlausibleTokens ||
                              api.usage.output_tokens > kloop::agent::kMaxPlausibleTokens))
      __builtin_trap();
  }
  (void)kloop::agent::openai_error_message(body);
  (void)kloop::agent::anthropic_error_message(body);
  reply_text(body);
  return 0;
}
