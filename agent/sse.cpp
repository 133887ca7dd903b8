// Server-sent events framing (sse.h).
#include "agent/sse.h"

namespace kloop::agent {

void SseDecoder::line(std::string_view text, std::vector<SseEvent>& out) {
  if (text.empty()) { // dispatch
    if (has_data_ || !event_.event.empty()) {
      event_.id = last_id_;
      out.push_back(std::move(event_));
    }
    event_ = SseEvent{};
    has_data_ = false;
    return;
  }
  if (text.front() == ':') return; // comment (keep-alive)
  std::string_view field = text, value;
  if (const auto colon = text.find(':'); colon != std::string_view::npos) {
    field = text.substr(0, colon);
    value = text.substr(colon + 1);
    if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  }
  if (field == "event") {
    event_.event = std::string(value);
  } else if (field == "data") {
    if (has_data_) event_.data.push_back('\n');
    event_.data.append(value);
    has_data_ = true;
  } else if (field == "id") {
    if (value.find('\0') == std::string_view::npos) last_id_ = std::string(value);
  } // "retry" and unknown fields are ignored
}

void SseDecoder::feed(std::string_view bytes, std::vector<SseEvent>& out) {
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (!started_) {
      // A byte order mark (EF BB BF) at the very start is not part of the first line.
      static constexpr char kBom[] = "\xEF\xBB\xBF";
      if (line_.size() < 3 && c == kBom[line_.size()]) {
        line_.push_back(c);
        if (line_.size() == 3) {
          line_.clear();
          started_ = true;
        }
        continue;
      }
      started_ = true; // not a BOM: what was held back is text
    }
    if (c == '\n' && after_cr_) { // the LF of a CRLF
      after_cr_ = false;
      continue;
    }
    after_cr_ = c == '\r';
    if (c == '\n' || c == '\r') {
      line(line_, out);
      line_.clear();
    } else {
      line_.push_back(c);
    }
  }
}

std::vector<SseEvent> parse_sse(std::string_view bytes) {
  SseDecoder d;
  std::vector<SseEvent> out;
  d.feed(bytes, out);
  return out;
}

} // namespace kloop::agent
