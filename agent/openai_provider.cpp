#include "agent/openai_provider.h"

#include <fmt/format.h>

namespace kloop::agent {

namespace {

using nlohmann::json;

// message.content as text: a string, or the "text" of each text part of an array.
std::optional<std::string> content_text(const json& content) {
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return std::nullopt;
  std::string out;
  for (const auto& part : content)
    if (part.is_object() && part.value("type", std::string()) == "text")
      out += json_string(part, "text");
  return out;
}

} // namespace

json openai_request_json(const ProviderRequest& request, const std::string& default_model,
                         const WireOptions& wire) {
  json messages = json::array();
  if (!request.system.empty())
    messages.push_back({{"role", "system"}, {"content", request.system}});
  for (const auto& m : request.messages)
    messages.push_back({{"role", m.role}, {"content", m.content}});
  json body = {{"model", request.model.empty() ? default_model : request.model},
               {"messages", std::move(messages)}};
  body[wire.max_tokens_field.empty() ? "max_tokens" : wire.max_tokens_field] = request.max_tokens;
  if (wire.temperature) body["temperature"] = request.temperature;
  if (wire.stream) {
    body["stream"] = true;
    if (wire.stream_usage) body["stream_options"] = {{"include_usage", true}};
  }
  return body;
}

ApiReply openai_parse_reply(const std::string& body) {
  ApiReply out;
  const auto j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    out.error = "response body is not a JSON object (or not valid UTF-8)";
    return out;
  }
  out.usage = read_usage(json_member(j, "usage"), "prompt_tokens", "completion_tokens");
  const json* choices = json_member(j, "choices");
  if (!choices || !choices->is_array() || choices->empty() || !(*choices)[0].is_object()) {
    out.error = "no choices[0] in the response";
    return out;
  }
  const json& choice = (*choices)[0];
  out.stop_reason = json_string(choice, "finish_reason");
  out.truncated = is_token_limit(out.stop_reason);
  const json* msg = json_member(choice, "message");
  if (!msg || !msg->is_object()) {
    out.error = "choices[0].message is missing";
    return out;
  }
  out.reasoning = json_string(*msg, "reasoning_content") + json_string(*msg, "reasoning");
  out.refusal = json_string(*msg, "refusal");
  const json* content = json_member(*msg, "content");
  const std::optional<std::string> text = content ? content_text(*content) : std::string();
  if (!text || (!content && !out.truncated && out.refusal.empty() && out.reasoning.empty())) {
    out.error = fmt::format("choices[0].message.content is missing or not text (finish_reason {})",
                            out.stop_reason.empty() ? "absent" : out.stop_reason);
    return out;
  }
  out.text = *text;
  out.ok = true;
  return out;
}

ApiReply openai_parse_stream(const std::vector<SseEvent>& events, bool pending) {
  ApiReply out;
  bool done = false;
  const json* usage = nullptr;
  json last_usage;
  std::size_t bad = 0, index = 0, first_bad = 0;
  for (const auto& e : events) {
    ++index;
    if (e.data == "[DONE]") {
      done = true;
      continue;
    }
    const auto j = json::parse(e.data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      if (bad++ == 0) first_bad = index;
      continue;
    }
    if (const json* err = json_member(j, "error")) {
      out.stream_error_type = err->is_object()
                                  ? (json_string(*err, "type").empty() ? json_string(*err, "code")
                                                                       : json_string(*err, "type"))
                                  : std::string("error");
      if (out.stream_error_type.empty()) out.stream_error_type = "error";
      out.stream_error_message = err->is_object()   ? json_string(*err, "message")
                                 : err->is_string() ? err->get<std::string>()
                                                    : std::string();
      continue;
    }
    if (const json* u = json_member(j, "usage")) {
      last_usage = *u;
      usage = &last_usage;
    }
    const json* choices = json_member(j, "choices");
    if (!choices || !choices->is_array() || choices->empty()) continue;
    const json& c = (*choices)[0];
    if (const std::string f = json_string(c, "finish_reason"); !f.empty()) out.stop_reason = f;
    const json* delta = json_member(c, "delta");
    if (!delta) continue;
    if (const json* content = json_member(*delta, "content"))
      if (auto t = content_text(*content)) out.text += *t;
    out.reasoning += json_string(*delta, "reasoning_content") + json_string(*delta, "reasoning");
    out.refusal += json_string(*delta, "refusal");
  }
  out.usage = read_usage(usage, "prompt_tokens", "completion_tokens");
  out.truncated = is_token_limit(out.stop_reason);
  if (!out.stream_error_type.empty()) return out;
  if (bad > 0) {
    out.error = fmt::format("{} stream event(s) are not JSON objects (or not valid UTF-8), first "
                            "event {}",
                            bad, first_bad);
    return out;
  }
  if (!done && out.stop_reason.empty()) {
    out.incomplete = true;
    out.error = pending ? "the stream ended inside an event" : "the stream ended without [DONE]";
    return out;
  }
  out.ok = true;
  return out;
}

std::string openai_error_message(const std::string& body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "";
  const auto e = j.find("error");
  if (e == j.end()) return "";
  if (e->is_string()) return e->get<std::string>();
  if (e->is_object() && e->contains("message") && (*e)["message"].is_string())
    return (*e)["message"].get<std::string>();
  return "";
}

namespace {

class OpenAiProvider final : public HttpJsonProvider {
public:
  OpenAiProvider(HttpProviderConfig config, ProviderRuntime runtime, std::string key,
                 WireOptions wire)
      : HttpJsonProvider(std::move(config), std::move(runtime), std::move(key), std::move(wire)) {}
  std::string name() const override { return "openai"; }

protected:
  std::string endpoint_url() const override { return config().base_url + "/chat/completions"; }
  std::vector<std::pair<std::string, std::string>> headers() const override {
    std::vector<std::pair<std::string, std::string>> h = {{"Content-Type", "application/json"}};
    if (!api_key().empty()) h.emplace_back("Authorization", "Bearer " + api_key());
    return h;
  }
  std::string request_body(const ProviderRequest& request, const WireOptions& wire) const override {
    return openai_request_json(request, config().model, wire)
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  ApiReply parse_reply_body(const std::string& body) const override {
    return openai_parse_reply(body);
  }
  ApiReply parse_stream(const std::vector<SseEvent>& events, bool pending) const override {
    return openai_parse_stream(events, pending);
  }
  std::string api_error_message(const std::string& body) const override {
    return openai_error_message(body);
  }
};

} // namespace

std::unique_ptr<Provider> make_openai_provider(HttpProviderConfig config, ProviderRuntime runtime) {
  if (config.base_url.empty()) config.base_url = kOpenAiDefaultBaseUrl;
  if (config.api_key_env.empty()) config.api_key_env = kOpenAiDefaultKeyEnv;
  config.base_url = trim_base_url(config.base_url);
  const bool official = url_host(config.base_url) == "api.openai.com";
  std::string key = read_api_key(config.api_key_env, official,
                                 "api.openai.com needs a key; local servers may run without one");
  WireOptions wire;
  wire.stream = config.stream;
  // api.openai.com's newer models refuse max_tokens; other servers may not know the newer field.
  wire.max_tokens_field = official ? "max_completion_tokens" : "max_tokens";
  return std::make_unique<OpenAiProvider>(std::move(config), std::move(runtime), std::move(key),
                                          std::move(wire));
}

} // namespace kloop::agent
