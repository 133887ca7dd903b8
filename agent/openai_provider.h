// The OpenAI Chat Completions provider: POST {base_url}/chat/completions with a bearer key. The
// base URL is configurable, so the same client serves api.openai.com and any compatible server
// (vLLM, SGLang, llama.cpp server, Ollama). The request/response JSON functions are free functions
// so unit tests check them without a server.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/http_provider.h"

namespace kloop::agent {

inline constexpr const char* kOpenAiDefaultBaseUrl = "https://api.openai.com/v1";
inline constexpr const char* kOpenAiDefaultKeyEnv = "OPENAI_API_KEY";

// Request body: {"model", "messages":[{"role":"system",...}, turns...], wire.max_tokens_field
// ("max_completion_tokens" for api.openai.com, "max_tokens" for other servers), "temperature"
// (unless the server refused it), and when streaming "stream": true with "stream_options":
// {"include_usage": true} (usage in the final chunk). The system message is omitted when
// request.system is empty; `default_model` is used when request.model is empty.
nlohmann::json openai_request_json(const ProviderRequest& request, const std::string& default_model,
                                   const WireOptions& wire);

// Parses a Chat Completions reply: text from choices[0].message.content (a string, or an array of
// {"type":"text","text"} parts), reasoning from "reasoning_content" or "reasoning", the API's
// "refusal", finish_reason ("length" = truncated), usage from usage.prompt_tokens /
// usage.completion_tokens (read_usage). A null content is an empty reply when the finish reason or
// a refusal explains it. Not ok (with the reason) when the body is not JSON, has no choices, or the
// content is missing without an explanation.
ApiReply openai_parse_reply(const std::string& body);

// Parses a streamed reply: "data: {chunk}" events whose choices[0].delta carry "content",
// "reasoning_content" / "reasoning" and "refusal", a finish_reason in the last content chunk,
// usage in a final chunk with empty choices, and "data: [DONE]". An {"error": {...}} chunk sets
// stream_error_type; a stream with neither [DONE] nor a finish_reason is incomplete.
ApiReply openai_parse_stream(const std::vector<SseEvent>& events, bool pending);

// "error.message" of an OpenAI-style error body, or "" (bodies that are not JSON give "").
std::string openai_error_message(const std::string& body);

// Builds the provider. config.base_url defaults to kOpenAiDefaultBaseUrl and config.api_key_env to
// kOpenAiDefaultKeyEnv when empty. The key is required when the host is api.openai.com (throws
// ProviderConfigError naming the variable); for another base URL an absent key is allowed and no
// Authorization header is sent.
std::unique_ptr<Provider> make_openai_provider(HttpProviderConfig config, ProviderRuntime runtime);

} // namespace kloop::agent
