#include "agent/anthropic_provider.h"

#include <fmt/format.h>

namespace kloop::agent {

using nlohmann::json;

json anthropic_request_json(const ProviderRequest& request, const std::string& default_model,
                            const WireOptions& wire) {
  json messages = json::array();
  for (const auto& m : request.messages)
    messages.push_back({{"role", m.role}, {"content", m.content}});
  json body = {{"model", request.model.empty() ? default_model : request.model},
               {"messages", std::move(messages)},
               {"max_tokens", request.max_tokens}};
  if (wire.temperature) body["temperature"] = request.temperature;
  if (!request.system.empty()) body["system"] = request.system;
  if (wire.stream) body["stream"] = true;
  return body;
}

ApiReply anthropic_parse_reply(const std::string& body) {
  ApiReply out;
  const auto j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    out.error = "response body is not a JSON object (or not valid UTF-8)";
    return out;
  }
  out.usage = read_usage(json_member(j, "usage"), "input_tokens", "output_tokens");
  out.stop_reason = json_string(j, "stop_reason");
  out.truncated = is_token_limit(out.stop_reason);
  if (out.stop_reason == "refusal") out.refusal = "the API stopped the reply (stop_reason refusal)";
  const json* content = json_member(j, "content");
  if (!content || !content->is_array()) {
    out.error = "no content array in the response";
    return out;
  }
  bool any = false;
  for (const auto& block : *content) {
    if (!block.is_object()) continue;
    const std::string type = json_string(block, "type");
    if (type == "text" && json_member(block, "text") && block["text"].is_string()) {
      out.text += block["text"].get<std::string>();
      any = true;
    } else if (type == "thinking") {
      out.reasoning += json_string(block, "thinking");
    }
  }
  if (!any && !out.truncated && out.refusal.empty()) {
    out.error = fmt::format("no text block in content (stop_reason {})",
                            out.stop_reason.empty() ? "absent" : out.stop_reason);
    return out;
  }
  out.ok = true;
  return out;
}

ApiReply anthropic_parse_stream(const std::vector<SseEvent>& events, bool pending) {
  ApiReply out;
  bool stopped = false;
  json input = nullptr, output = nullptr; // the usage counts as sent, validated by read_usage
  std::size_t bad = 0, index = 0, first_bad = 0;
  for (const auto& e : events) {
    ++index;
    const auto j = json::parse(e.data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      if (bad++ == 0) first_bad = index;
      continue;
    }
    const std::string type = e.event.empty() ? json_string(j, "type") : e.event;
    if (type == "error") {
      const json* err = json_member(j, "error");
      out.stream_error_type = err ? json_string(*err, "type") : std::string();
      if (out.stream_error_type.empty()) out.stream_error_type = "error";
      out.stream_error_message = err ? json_string(*err, "message") : std::string();
    } else if (type == "message_start") {
      if (const json* m = json_member(j, "message"))
        if (const json* u = json_member(*m, "usage")) {
          if (const json* v = json_member(*u, "input_tokens")) input = *v;
          if (const json* v = json_member(*u, "output_tokens")) output = *v;
        }
    } else if (type == "content_block_start") {
      if (const json* b = json_member(j, "content_block")) {
        if (json_string(*b, "type") == "text") out.text += json_string(*b, "text");
        if (json_string(*b, "type") == "thinking") out.reasoning += json_string(*b, "thinking");
      }
    } else if (type == "content_block_delta") {
      if (const json* d = json_member(j, "delta")) {
        const std::string dt = json_string(*d, "type");
        if (dt == "text_delta") out.text += json_string(*d, "text");
        if (dt == "thinking_delta") out.reasoning += json_string(*d, "thinking");
      }
    } else if (type == "message_delta") {
      if (const json* d = json_member(j, "delta"))
        if (const std::string s = json_string(*d, "stop_reason"); !s.empty()) out.stop_reason = s;
      if (const json* u = json_member(j, "usage")) {
        if (const json* v = json_member(*u, "output_tokens")) output = *v; // cumulative
        if (const json* v = json_member(*u, "input_tokens")) input = *v;
      }
    } else if (type == "message_stop") {
      stopped = true;
    }
  }
  json usage = json::object();
  if (!input.is_null()) usage["input_tokens"] = input;
  if (!output.is_null()) usage["output_tokens"] = output;
  out.usage = read_usage(&usage, "input_tokens", "output_tokens");
  out.truncated = is_token_limit(out.stop_reason);
  if (out.stop_reason == "refusal") out.refusal = "the API stopped the reply (stop_reason refusal)";
  if (!out.stream_error_type.empty()) return out;
  if (bad > 0) {
    out.error = fmt::format("{} stream event(s) are not JSON objects (or not valid UTF-8), first "
                            "event {}",
                            bad, first_bad);
    return out;
  }
  if (!stopped) {
    out.incomplete = true;
    out.error = pending ? "the stream ended inside an event"
                        : "the stream ended without "
                          "message_stop";
    return out;
  }
  out.ok = true;
  return out;
}

std::string anthropic_error_message(const std::string& body) {
  const auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return "";
  const auto e = j.find("error");
  if (e == j.end() || !e->is_object()) return "";
  std::string type = e->value("type", "");
  std::string msg = e->contains("message") && (*e)["message"].is_string()
                        ? (*e)["message"].get<std::string>()
                        : "";
  return type.empty() ? msg : (msg.empty() ? type : type + ": " + msg);
}

namespace {

class AnthropicProvider final : public HttpJsonProvider {
public:
  AnthropicProvider(HttpProviderConfig config, ProviderRuntime runtime, std::string key,
                    WireOptions wire)
      : HttpJsonProvider(std::move(config), std::move(runtime), std::move(key), std::move(wire)) {}
  std::string name() const override { return "anthropic"; }

protected:
  std::string endpoint_url() const override { return config().base_url + "/v1/messages"; }
  std::vector<std::pair<std::string, std::string>> headers() const override {
    std::vector<std::pair<std::string, std::string>> h = {{"Content-Type", "application/json"},
                                                          {"anthropic-version", kAnthropicVersion}};
    if (!api_key().empty()) h.emplace_back("x-api-key", api_key());
    return h;
  }
  std::string request_body(const ProviderRequest& request, const WireOptions& wire) const override {
    return anthropic_request_json(request, config().model, wire)
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  ApiReply parse_reply_body(const std::string& body) const override {
    return anthropic_parse_reply(body);
  }
  ApiReply parse_stream(const std::vector<SseEvent>& events, bool pending) const override {
    return anthropic_parse_stream(events, pending);
  }
  std::string api_error_message(const std::string& body) const override {
    return anthropic_error_message(body);
  }
};

} // namespace

std::unique_ptr<Provider> make_anthropic_provider(HttpProviderConfig config,
                                                  ProviderRuntime runtime) {
  if (config.base_url.empty()) config.base_url = kAnthropicDefaultBaseUrl;
  if (config.api_key_env.empty()) config.api_key_env = kAnthropicDefaultKeyEnv;
  config.base_url = trim_base_url(config.base_url);
  const bool official = url_host(config.base_url) == "api.anthropic.com";
  std::string key =
      read_api_key(config.api_key_env, official,
                   "api.anthropic.com needs a key; a custom base URL may run without one");
  WireOptions wire;
  wire.stream = config.stream;
  return std::make_unique<AnthropicProvider>(std::move(config), std::move(runtime), std::move(key),
                                             std::move(wire));
}

} // namespace kloop::agent
