// The Anthropic Messages provider: POST {base_url}/v1/messages with the `x-api-key` and
// `anthropic-version: 2023-06-01` headers. The request/response JSON functions are free functions
// so unit tests check them without a server.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/http_provider.h"
#include "agent/sse.h"

namespace kloop::agent {

inline constexpr const char* kAnthropicDefaultBaseUrl = "https://api.anthropic.com";
inline constexpr const char* kAnthropicDefaultKeyEnv = "ANTHROPIC_API_KEY";
inline constexpr const char* kAnthropicVersion = "2023-06-01";

// Request body: {"model", "system" (omitted when empty), "messages":[turns...], "max_tokens",
// "temperature" (unless the server refused it), "stream": true when streaming}. `default_model`
// is used when request.model is empty.
nlohmann::json anthropic_request_json(const ProviderRequest& request,
                                      const std::string& default_model, const WireOptions& wire);

// Parses a Messages reply: the concatenated "text" of every content block of type "text", the
// "thinking" of thinking blocks as reasoning, stop_reason ("max_tokens" = truncated; "refusal"),
// usage from usage.input_tokens / usage.output_tokens (read_usage). Not ok (with the reason) when
// the body is not JSON, has no content array, or holds no text block without a stop reason that
// explains it.
ApiReply anthropic_parse_reply(const std::string& body);

// Parses a streamed Messages reply: message_start (input tokens), content_block_delta
// (text_delta, thinking_delta), message_delta (stop_reason, output tokens; input tokens when
// sent), message_stop, ping, and the mid-stream error event ({"type":"error","error":{"type":
// "overloaded_error",...}} sets stream_error_type). A stream without message_stop is incomplete.
ApiReply anthropic_parse_stream(const std::vector<SseEvent>& events, bool pending);

// "error.message" of an Anthropic error body ({"type":"error","error":{...}}), or "".
std::string anthropic_error_message(const std::string& body);

// Builds the provider. config.base_url defaults to kAnthropicDefaultBaseUrl and config.api_key_env
// to kAnthropicDefaultKeyEnv when empty. The key is required when the host is api.anthropic.com
// (throws ProviderConfigError naming the variable); a custom base URL may run without one.
std::unique_ptr<Provider> make_anthropic_provider(HttpProviderConfig config,
                                                  ProviderRuntime runtime);

} // namespace kloop::agent
