#include "agent/anthropic_provider.h"

#include <fmt/format.h>

namespace kloop::agent {

nlohmann::json anthropic_request_json(const ProviderRequest& request,
                                      const std::string& default_model) {
  nlohmann::json messages = nlohmann::json::array();
  for (const auto& m : request.messages)
    messages.push_back({{"role", m.role}, {"content", m.content}});
  nlohmann::json body = {{"model", request.model.empty() ? default_model : request.model},
                         {"messages", std::move(messages)},
                         {"max_tokens", request.max_tokens},
                         {"temperature", request.temperature}};
  if (!request.system.empty()) body["system"] = request.system;
  return body;
}

ApiReply anthropic_parse_reply(const std::string& body) {
  ApiReply out;
  const auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    out.error = "response body is not a JSON object";
    return out;
  }
  if (const auto u = j.find("usage"); u != j.end()) {
    out.usage = usage_from_json(*u, "input_tokens", "output_tokens");
    if (!out.usage.invalid.empty()) { // recorded as such, never as 0 tokens (TokenUsage)
      out.error = "the usage it reports makes no sense: " + out.usage.invalid;
      return out;
    }
  }
  const auto content = j.find("content");
  if (content == j.end() || !content->is_array()) {
    out.error = "no content array in the response";
    return out;
  }
  bool any = false;
  for (const auto& block : *content) {
    if (block.is_object() && block.value("type", "") == "text" && block.contains("text") &&
        block["text"].is_string()) {
      out.text += block["text"].get<std::string>();
      any = true;
    }
  }
  if (!any) {
    out.error = fmt::format("no text block in content (stop_reason {})",
                            j.contains("stop_reason") ? j["stop_reason"].dump() : "absent");
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
  AnthropicProvider(HttpProviderConfig config, ProviderRuntime runtime, std::string key)
      : HttpJsonProvider(std::move(config), std::move(runtime), std::move(key)) {}
  std::string name() const override { return "anthropic"; }

protected:
  std::string endpoint_url() const override { return config().base_url + "/v1/messages"; }
  std::vector<std::pair<std::string, std::string>> headers() const override {
    std::vector<std::pair<std::string, std::string>> h = {{"Content-Type", "application/json"},
                                                          {"anthropic-version", kAnthropicVersion}};
    if (!api_key().empty()) h.emplace_back("x-api-key", api_key());
    return h;
  }
  std::string request_body(const ProviderRequest& request) const override {
    return anthropic_request_json(request, config().model)
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  ApiReply parse_reply_body(const std::string& body) const override {
    return anthropic_parse_reply(body);
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
  return std::make_unique<AnthropicProvider>(std::move(config), std::move(runtime), std::move(key));
}

} // namespace kloop::agent
