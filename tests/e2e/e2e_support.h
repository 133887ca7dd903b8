// Helpers of the end-to-end tests (tests/e2e/): the real kloop executable run as a user runs it
// (a clean environment, a deadline), fresh temp folders, model replies, and an OpenAI-compatible
// chat-completions server on 127.0.0.1 (cpp-httplib) whose replies, usage and delays a test sets.
#pragma once

#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/subprocess.h"
#include "tests/support/test_files.h"

namespace kloop::e2e {

namespace fs = std::filesystem;
using nlohmann::json;

// The kloop under test: this build's, or $KLOOP_TEST_KLOOP (another build's, e.g. to show that a
// test fails on the commit before a fix).
inline const std::string kKloop = [] {
  const char* other = std::getenv("KLOOP_TEST_KLOOP");
  return other && *other ? std::string(other) : std::string(KLOOP_BINARY_DIR) + "/bin/kloop";
}();

using test_support::read_file;

inline void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

// An empty folder $TMPDIR/kloop-e2e-NAME-PID (emptied first).
inline fs::path fresh_dir(const std::string& name) {
  const fs::path dir =
      fs::temp_directory_path() / ("kloop-e2e-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Runs kloop ARGS with PATH, HOME (and `extra_env`) only, under a deadline.
inline evaluator::ToolCall kloop_run(const std::vector<std::string>& args, int deadline_s = 240,
                                     const std::map<std::string, std::string>& extra_env = {}) {
  std::vector<std::string> argv{kKloop};
  argv.insert(argv.end(), args.begin(), args.end());
  evaluator::SubprocessOptions o;
  o.deadline = std::chrono::seconds(deadline_s);
  o.env = {{"PATH", "/usr/bin:/bin"}, {"HOME", "/tmp"}};
  for (const auto& [k, v] : extra_env)
    o.env[k] = v;
  return evaluator::run_subprocess(argv, o);
}

// Starts kloop ARGS in the background with stdout to `stdout_file`; returns its pid.
inline pid_t kloop_spawn(const std::vector<std::string>& args, const fs::path& stdout_file,
                         const std::map<std::string, std::string>& extra_env = {}) {
  std::vector<std::string> argv{kKloop};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<std::string> env{"PATH=/usr/bin:/bin", "HOME=/tmp"};
  for (const auto& [k, v] : extra_env)
    env.push_back(k + "=" + v);
  const pid_t pid = ::fork();
  if (pid == 0) {
    std::vector<char*> cargv, cenv;
    for (auto& a : argv)
      cargv.push_back(a.data());
    cargv.push_back(nullptr);
    for (auto& e : env)
      cenv.push_back(e.data());
    cenv.push_back(nullptr);
    const int fd = ::open(stdout_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execve(cargv[0], cargv.data(), cenv.data());
    _exit(127);
  }
  return pid;
}

// Waits for `pid`; returns its exit status (128 + signal when killed), -1 when it did not end
// within `deadline_s` (it is killed then).
inline int wait_exit(pid_t pid, int deadline_s = 240) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(deadline_s);
  int status = 0;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() > end) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A model reply with the given kernel source and manifest.
inline std::string reply_with(const std::string& cu, const std::string& manifest) {
  return "Here is the kernel.\n\n```cuda\n" + cu + "\n```\n\n```json\n" + manifest + "\n```\n";
}

inline std::string good_source() {
  return read_file(fs::path(KLOOP_SOURCE_DIR) / "tests/evaluator/fixtures/good/kernel.cu");
}
inline std::string good_manifest() {
  return read_file(fs::path(KLOOP_SOURCE_DIR) / "tests/evaluator/fixtures/good/manifest.json");
}

// A chat-completions body with reply `text` and `usage` (the API's "usage" object).
inline std::string completion_body(const std::string& text,
                                   const json& usage = {{"prompt_tokens", 100},
                                                        {"completion_tokens", 50},
                                                        {"total_tokens", 150}}) {
  json body = {{"id", "x"},
               {"object", "chat.completion"},
               {"choices",
                {{{"index", 0},
                  {"message", {{"role", "assistant"}, {"content", text}}},
                  {"finish_reason", "stop"}}}},
               {"usage", usage}};
  return body.dump();
}

// completion_body of each reply text.
inline std::vector<std::string> completions(const std::vector<std::string>& texts) {
  std::vector<std::string> bodies;
  for (const auto& t : texts)
    bodies.push_back(completion_body(t));
  return bodies;
}

// An OpenAI-compatible chat completions server on 127.0.0.1. Request i gets bodies[min(i, n-1)]
// (HTTP 200, application/json) after delay_ms[i]; every request body is recorded.
class FakeOpenAi {
public:
  explicit FakeOpenAi(std::vector<std::string> bodies, std::vector<int> delay_ms = {})
      : bodies_(std::move(bodies)), delays_(std::move(delay_ms)) {
    server_.Post(
        "/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
          std::size_t index;
          {
            std::lock_guard<std::mutex> lock(mu_);
            index = requests_.size();
            requests_.push_back(req.body);
          }
          if (index < delays_.size() && delays_[index] > 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(delays_[index]));
          res.set_content(bodies_[std::min(index, bodies_.size() - 1)], "application/json");
        });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeOpenAi() {
    server_.stop();
    thread_.join();
  }
  std::string base_url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/v1"; }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  // Waits until `n` requests arrived (true) or `deadline_s` passed (false).
  bool wait_for_requests(std::size_t n, int deadline_s = 120) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(deadline_s);
    while (requests().size() < n && std::chrono::steady_clock::now() < end)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return requests().size() >= n;
  }

private:
  std::vector<std::string> bodies_;
  std::vector<int> delays_;
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  std::vector<std::string> requests_;
};

// The command a message prints between backticks after `marker` (e.g. "continue with "), split
// into words (paths without spaces), without the leading "kloop".
inline std::vector<std::string> hinted_command(const std::string& text, const std::string& marker) {
  const auto at = text.find(marker);
  if (at == std::string::npos) return {};
  std::string rest = text.substr(at + marker.size());
  if (!rest.empty() && rest.front() == '`') rest = rest.substr(1, rest.find('`', 1) - 1);
  rest = rest.substr(0, rest.find_first_of("\n)"));
  std::vector<std::string> words;
  std::istringstream split(rest);
  for (std::string w; split >> w;)
    words.push_back(w);
  if (!words.empty() && words.front() == "kloop") words.erase(words.begin());
  return words;
}

} // namespace kloop::e2e
