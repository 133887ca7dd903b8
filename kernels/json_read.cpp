#include "kernels/json_read.h"

#include <vector>

#include <fmt/core.h>

namespace kloop {
namespace {

using nlohmann::json;

// A SAX handler that builds the document like json::parse and keeps the path of the value being
// read, so an overflowing number can be named by its field.
class PathSax : public nlohmann::json_sax<json> {
public:
  explicit PathSax(JsonRead& out) : out_(out) {}

  bool null() override { return put(json(nullptr)); }
  bool boolean(bool v) override { return put(json(v)); }
  bool number_integer(number_integer_t v) override { return put(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return put(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return put(json(v)); }
  bool string(string_t& v) override { return put(json(std::move(v))); }
  bool binary(binary_t& v) override { return put(json::binary(std::move(v))); }
  bool start_object(std::size_t) override {
    if (stack_.empty()) out_.top_level_object = true;
    return open(json::object());
  }
  bool key(string_t& k) override {
    frames_.back().key = k;
    if (out_.duplicate_key.empty() && stack_.back()->contains(k))
      out_.duplicate_key = current_path();
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    out_.error = e.what();
    if (e.id == 406) { // out_of_range.406: number overflow; the path is where it would go
      out_.number_overflow = true;
      out_.path = current_path();
    }
    return false;
  }

  json take() { return std::move(root_); }

private:
  struct Frame {
    std::string key; // of the member being read (objects)
  };

  // The path of the value about to be read: "a.b[2].c". An outer array's element on the path is
  // its last (the open container); the innermost array's is the one about to be added.
  std::string current_path() const {
    std::string path;
    for (std::size_t i = 0; i < stack_.size(); ++i) {
      if (stack_[i]->is_object())
        path += (path.empty() ? "" : ".") + frames_[i].key;
      else
        path += fmt::format("[{}]", stack_[i]->size() - (i + 1 < stack_.size() ? 1 : 0));
    }
    return path;
  }
  bool put(json v) {
    if (stack_.empty()) {
      root_ = std::move(v);
    } else if (stack_.back()->is_object()) {
      (*stack_.back())[frames_.back().key] = std::move(v);
    } else {
      stack_.back()->push_back(std::move(v));
    }
    return true;
  }
  bool open(json v) {
    json* slot = nullptr;
    if (stack_.empty()) {
      root_ = std::move(v);
      slot = &root_;
    } else if (stack_.back()->is_object()) {
      slot = &((*stack_.back())[frames_.back().key] = std::move(v));
    } else {
      stack_.back()->push_back(std::move(v));
      slot = &stack_.back()->back();
    }
    stack_.push_back(slot);
    frames_.push_back({});
    return true;
  }
  bool close() {
    stack_.pop_back();
    frames_.pop_back();
    return true;
  }

  JsonRead& out_;
  json root_;
  std::vector<json*> stack_;  // the open containers, outermost first
  std::vector<Frame> frames_; // one per open container
};

} // namespace

JsonRead read_json(std::string_view text) {
  JsonRead out;
  PathSax sax(out);
  bool ok = false;
  try {
    ok = json::sax_parse(text.begin(), text.end(), &sax, json::input_format_t::json,
                         /*strict=*/true);
  } catch (const json::exception& e) { // not expected from the SAX interface; kept a value
    out.error = e.what();
    ok = false;
  }
  if (ok) out.value = sax.take();
  return out;
}

} // namespace kloop
