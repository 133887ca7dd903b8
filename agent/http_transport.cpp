#include "agent/http_transport.h"

#include <algorithm>
#include <cctype>
#include <memory>
#include <mutex>
#include <thread>

#include <curl/curl.h>

#include "evaluator/gate.h"

namespace kloop::agent {
namespace {

struct EasyDeleter {
  void operator()(CURL* h) const { curl_easy_cleanup(h); }
};
struct SlistDeleter {
  void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};
using EasyHandle = std::unique_ptr<CURL, EasyDeleter>;
using Slist = std::unique_ptr<curl_slist, SlistDeleter>;

// State shared with the callbacks of one transfer.
struct Transfer {
  std::string body;
  std::map<std::string, std::string> headers;
  std::size_t max_bytes = 0;
  bool too_large = false;
  const std::atomic<bool>* cancel = nullptr;
  bool cancelled = false;
  const HttpRequest* request = nullptr;
  std::chrono::steady_clock::time_point start, last_data, last_progress;
  bool idle = false; // the idle limit ended the transfer
};

std::size_t on_body(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t bytes = size * n;
  if (t->body.size() + bytes > t->max_bytes) {
    t->too_large = true;
    return 0; // fewer bytes than given: libcurl aborts with CURLE_WRITE_ERROR
  }
  t->body.append(data, bytes);
  t->last_data = std::chrono::steady_clock::now();
  if (t->request->on_data) t->request->on_data(std::string_view(data, bytes));
  return bytes;
}

std::size_t on_header(char* data, std::size_t size, std::size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::size_t bytes = size * n;
  std::string line(data, bytes);
  if (line.rfind("HTTP/", 0) == 0) t->headers.clear(); // a new response (e.g. after 100)
  const auto colon = line.find(':');
  if (colon == std::string::npos) return bytes;
  std::string name = line.substr(0, colon);
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  std::string value = line.substr(colon + 1);
  const auto first = value.find_first_not_of(" \t");
  const auto last = value.find_last_not_of(" \t\r\n");
  value = first == std::string::npos ? "" : value.substr(first, last - first + 1);
  t->headers[name] = value;
  return bytes;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (t->cancel && t->cancel->load()) {
    t->cancelled = true;
    return 1; // non-zero: CURLE_ABORTED_BY_CALLBACK
  }
  const auto now = std::chrono::steady_clock::now();
  const auto idle = t->request->idle_timeout;
  if (idle.count() > 0 && now - t->last_data > idle) {
    t->idle = true;
    return 1;
  }
  if (t->request->on_progress && now - t->last_progress >= std::chrono::milliseconds(250)) {
    t->last_progress = now;
    t->request->on_progress(t->body.size(),
                            std::chrono::duration_cast<std::chrono::milliseconds>(now - t->start));
  }
  return 0;
}

TransportStatus classify(CURLcode code, const Transfer& t) {
  if (t.cancelled) return TransportStatus::kCancelled;
  if (t.idle) return TransportStatus::kTimeout;
  if (t.too_large) return TransportStatus::kTooLarge;
  switch (code) {
  case CURLE_OPERATION_TIMEDOUT:
    return TransportStatus::kTimeout;
  case CURLE_COULDNT_CONNECT:
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_COULDNT_RESOLVE_PROXY:
    return TransportStatus::kConnectError;
  case CURLE_FILESIZE_EXCEEDED:
    return TransportStatus::kTooLarge;
  default:
    return TransportStatus::kIoError;
  }
}

} // namespace

const char* transport_status_name(TransportStatus status) {
  switch (status) {
  case TransportStatus::kOk:
    return "ok";
  case TransportStatus::kTimeout:
    return "timeout";
  case TransportStatus::kConnectError:
    return "connect_error";
  case TransportStatus::kIoError:
    return "io_error";
  case TransportStatus::kTooLarge:
    return "too_large";
  case TransportStatus::kCancelled:
    return "cancelled";
  }
  return "io_error";
}

CurlTransport::CurlTransport() {
  static std::once_flag once;
  static CURLcode init = CURLE_OK;
  std::call_once(once, [] { init = curl_global_init(CURL_GLOBAL_DEFAULT); });
  if (init != CURLE_OK)
    throw evaluator::InfraError(std::string("libcurl: global initialisation failed: ") +
                                curl_easy_strerror(init) + "; check the libcurl installation");
}

HttpResponse CurlTransport::post(const HttpRequest& request) {
  HttpResponse out;
  if (request.cancel && request.cancel->load()) {
    out.status = TransportStatus::kCancelled;
    out.error = "cancelled before the request was sent";
    return out;
  }
  EasyHandle easy(curl_easy_init());
  if (!easy) throw evaluator::InfraError("libcurl: curl_easy_init failed; out of memory?");
  Slist headers;
  for (const auto& [name, value] : request.headers) {
    const std::string line = name + ": " + value;
    curl_slist* next = curl_slist_append(headers.get(), line.c_str());
    if (!next) throw evaluator::InfraError("libcurl: curl_slist_append failed; out of memory?");
    (void)headers.release();
    headers.reset(next);
  }
  Transfer t;
  t.max_bytes = request.max_response_bytes;
  t.cancel = request.cancel;
  t.request = &request;
  t.start = t.last_data = t.last_progress = std::chrono::steady_clock::now();
  char errbuf[CURL_ERROR_SIZE] = {0};
  CURL* h = easy.get();
  curl_easy_setopt(h, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_POST, 1L);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, request.body.data());
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers.get());
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(request.connect_timeout.count()));
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, static_cast<long>(request.total_timeout.count()));
  curl_easy_setopt(h, CURLOPT_MAXFILESIZE_LARGE,
                   static_cast<curl_off_t>(request.max_response_bytes));
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, ""); // accept what libcurl can decode

  const CURLcode code = curl_easy_perform(h);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  out.http_status = status;
  out.body = std::move(t.body);
  out.headers = std::move(t.headers);
  if (code == CURLE_OK) return out;
  out.status = classify(code, t);
  if (out.status == TransportStatus::kTooLarge)
    out.error = "response body larger than " + std::to_string(request.max_response_bytes) +
                " bytes; transfer aborted";
  else if (out.status == TransportStatus::kCancelled)
    out.error = "cancelled during the transfer";
  else if (t.idle)
    out.error = "no data for " + std::to_string(request.idle_timeout.count() / 1000) +
                " s (idle timeout) after " + std::to_string(out.body.size()) + " bytes";
  else
    out.error =
        std::string(curl_easy_strerror(code)) + (errbuf[0] ? std::string(": ") + errbuf : "");
  return out;
}

std::chrono::steady_clock::time_point SystemClock::now() {
  return std::chrono::steady_clock::now();
}

bool SystemClock::sleep_for(std::chrono::milliseconds duration, const std::atomic<bool>* cancel) {
  const auto end = std::chrono::steady_clock::now() + duration;
  while (true) {
    if (cancel && cancel->load()) return false;
    const auto now = std::chrono::steady_clock::now();
    if (now >= end) return true;
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(end - now, std::chrono::milliseconds(20)));
  }
}

} // namespace kloop::agent
