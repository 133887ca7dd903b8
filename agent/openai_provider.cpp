#include "agent/openai_provider.h"

#include <fmt/format.h>

namespace kloop::agent {

nlohmann::json openai_request_json(const ProviderRequest& request,
                                   const std::string& default_model) {
  nlohmann::json messages = nlohmann::json::array();
  if (!request.system.empty())
    messages.push_back({{"role", "system"}, {"content", request.system}});
  for (const auto& m : request.messages)
    messages.push_back({{"role", m.role}, {"content", m.content}});
  return {{"model", request.model.empty() ? default_model : request.model},
          {"messages", std::move(messages)},
          {"max_tokens", request.max_tokens},
          {"temperature", request.temperature}};
}

ApiReply openai_parse_reply(const std::string& body) {
  ApiReply out;
  const auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    out.error = "response body is not a JSON object";
    return out;
  }
  if (const auto u = j.find("usage"); u != j.end()) {
    out.usage = usage_from_json(*u, "prompt_tokens", "completion_tokens");
    if (!out.usage.invalid.empty()) { // recorded as such, never as 0 tokens (TokenUsage)
      out.error = "the usage it reports makes no sense: " + out.usage.invalid;
      return out;
    }
  }
  const auto choices = j.find("choices");
  if (choices == j.end() || !choices->is_array() || choices->empty() ||
      !(*choices)[0].is_object()) {
    out.error = "no choices[0] in the response";
    return out;
  }
  const auto& choice = (*choices)[0];
  const auto msg = choice.find("message");
  if (msg == choice.end() || !msg->is_object() || !msg->contains("content") ||
      !(*msg)["content"].is_string()) {
    out.error =
        fmt::format("choices[0].message.content is missing or not text (finish_reason {})",
                    choice.contains("finish_reason") ? choice["finish_reason"].dump() : "absent");
    return out;
  }
  out.text = (*msg)["content"].get<std::string>();
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
  OpenAiProvider(HttpProviderConfig config, ProviderRuntime runtime, std::string key)
      : HttpJsonProvider(std::move(config), std::move(runtime), std::move(key)) {}
  std::string name() const override { return "openai"; }

protected:
  std::string endpoint_url() const override { return config().base_url + "/chat/completions"; }
  std::vector<std::pair<std::string, std::string>> headers() const override {
    std::vector<std::pair<std::string, std::string>> h = {{"Content-Type", "application/json"}};
    if (!api_key().empty()) h.emplace_back("Authorization", "Bearer " + api_key());
    return h;
  }
  std::string request_body(const ProviderRequest& request) const override {
    return openai_request_json(request, config().model)
        .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  ApiReply parse_reply_body(const std::string& body) const override {
    return openai_parse_reply(body);
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
  return std::make_unique<OpenAiProvider>(std::move(config), std::move(runtime), std::move(key));
}

} // namespace kloop::agent
