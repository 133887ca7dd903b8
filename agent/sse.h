// Server-sent events framing (the WHATWG HTML standard, "Server-sent events", section "Event stream
// interpretation"), as the OpenAI-compatible and Anthropic streaming APIs use it: lines end in LF,
// CRLF or CR; a line starting with ':' is a comment; "field: value" lines set event, data (joined
// with LF when repeated), id and retry; a blank line dispatches the event when it has data or an
// event name; a leading UTF-8 byte order mark is dropped; an event not yet ended by a blank line
// when the stream ends is not dispatched (the caller can see it was pending). Pure byte handling:
// no JSON, no I/O, never throws, bounded state (one line and one event), so a fuzz target is
// `parse_sse(bytes)`.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace kloop::agent {

struct SseEvent {
  std::string event; // "" = the default type ("message")
  std::string data;  // data lines joined with '\n'
  std::string id;    // last event id seen ("" when none)
  bool operator==(const SseEvent&) const = default;
};

// Incremental decoder: feed() the body as it arrives, in chunks of any size.
class SseDecoder {
public:
  // Appends each event completed by `bytes` to `out`.
  void feed(std::string_view bytes, std::vector<SseEvent>& out);
  // True when bytes after the last dispatched event began another one (a stream cut mid-event).
  bool pending() const { return !line_.empty() || has_data_ || !event_.event.empty(); }

private:
  void line(std::string_view text, std::vector<SseEvent>& out);
  std::string line_;      // the current line so far
  bool after_cr_ = false; // the previous byte was CR (a following LF is part of that line end)
  bool started_ = false;  // past the optional byte order mark
  SseEvent event_;        // the event being built
  bool has_data_ = false;
  std::string last_id_;
};

// Every event of a complete body (the fuzz target).
std::vector<SseEvent> parse_sse(std::string_view bytes);

} // namespace kloop::agent
