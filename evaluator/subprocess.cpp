#include "evaluator/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>

#include <fmt/core.h>

#include "evaluator/gate.h"
#include "store/hash.h"

namespace kloop::evaluator {
namespace {

using Clock = std::chrono::steady_clock;

// Owns a file descriptor.
class Fd {
public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

private:
  int fd_ = -1;
};

// Owns a spawned child: if the caller unwinds before reaping it, the whole group is killed and
// the child reaped, so no process outlives an exception.
class ChildGuard {
public:
  explicit ChildGuard(pid_t pid) : pid_(pid) {}
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;
  ~ChildGuard() {
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  void reaped() { pid_ = -1; }

private:
  pid_t pid_;
};

std::array<Fd, 2> make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw InfraError(fmt::format("subprocess: pipe2 failed: {}", std::strerror(errno)));
  return {Fd(fds[0]), Fd(fds[1])};
}

double ms_of(const timeval& tv) {
  return tv.tv_sec * 1e3 + tv.tv_usec / 1e3;
}

// The deadline of SubprocessOptions: fixed, or restarted by each change of the progress file
// (size or modification time) up to deadline_cap. The file is checked at most every 200 ms.
class ProgressWatch {
public:
  ProgressWatch(const SubprocessOptions& o, Clock::time_point start)
      : path_(o.progress_file), stall_(o.deadline), start_(start), last_(start),
        cap_(start + std::max(o.deadline, o.deadline_cap)) {}
  Clock::time_point deadline() const {
    return path_.empty() ? start_ + stall_ : std::min(cap_, last_ + stall_);
  }
  Clock::time_point update(Clock::time_point now) {
    if (path_.empty() || now < next_check_) return deadline();
    next_check_ = now + std::chrono::milliseconds(200);
    struct stat st {};
    if (::stat(path_.c_str(), &st) == 0) {
      const std::array<long long, 3> seen{static_cast<long long>(st.st_size),
                                          static_cast<long long>(st.st_mtim.tv_sec),
                                          static_cast<long long>(st.st_mtim.tv_nsec)};
      if (!seen_ || *seen_ != seen) {
        seen_ = seen;
        last_ = now;
        ++changes_;
      }
    }
    return deadline();
  }
  // Whether the deadline that fires at `now` is a cap beyond the plain deadline while progress
  // was still being made (without such a cap every firing is the plain deadline's).
  bool capped(Clock::time_point now) const {
    return !path_.empty() && cap_ > start_ + stall_ && now >= cap_ && now < last_ + stall_;
  }
  int changes() const { return changes_; }
  bool active() const { return !path_.empty(); }

private:
  std::string path_;
  std::chrono::milliseconds stall_;
  Clock::time_point start_, last_, cap_, next_check_{};
  std::optional<std::array<long long, 3>> seen_;
  int changes_ = 0;
};

} // namespace

nlohmann::json ToolCall::to_json() const {
  return {{"argv", argv},
          {"cwd", cwd},
          {"exit_code", exit_code},
          {"signal", term_signal},
          {"timed_out", timed_out},
          {"wall_ms", wall_ms},
          {"user_cpu_ms", user_cpu_ms},
          {"sys_cpu_ms", sys_cpu_ms},
          {"max_rss_kib", max_rss_kib},
          {"stdout_sha256", stdout_sha256},
          {"stderr_sha256", stderr_sha256},
          {"stdout_truncated", stdout_truncated},
          {"stderr_truncated", stderr_truncated},
          {"detail", detail}};
}

long self_max_rss_kib() {
  struct rusage usage {};
  if (::getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return usage.ru_maxrss;
}

ToolCall run_subprocess(const std::vector<std::string>& argv, const SubprocessOptions& options) {
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/')
    throw InfraError("subprocess: argv[0] must be an absolute path to an executable");
  ToolCall call;
  call.argv = argv;
  call.cwd = options.cwd;

  auto out_pipe = make_pipe();
  auto err_pipe = make_pipe();

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1].get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1].get(), STDERR_FILENO);
  if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, options.cwd.c_str());

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t no_signals, default_signals;
  sigemptyset(&no_signals);
  sigfillset(&default_signals);
  posix_spawnattr_setsigmask(&attr, &no_signals);
  posix_spawnattr_setsigdefault(&attr, &default_signals);
  posix_spawnattr_setpgroup(&attr, 0); // own process group: the deadline kills all of it
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> c_argv;
  for (const auto& a : argv)
    c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : options.env)
    env_strings.push_back(k + "=" + v);
  std::vector<char*> c_env;
  for (auto& e : env_strings)
    c_env.push_back(e.data());
  c_env.push_back(nullptr);

  const auto start = Clock::now();
  call.started_ms = std::chrono::duration<double, std::milli>(start.time_since_epoch()).count();
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, &attr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0)
    throw InfraError(fmt::format("subprocess: cannot start {}: {}; check that it is built and "
                                 "executable",
                                 argv[0], std::strerror(rc)));
  ChildGuard guard(pid);
  out_pipe[1].reset();
  err_pipe[1].reset();

  // Read both streams until EOF, enforcing the deadline on the process group.
  struct Stream {
    Fd* fd;
    std::string* text;
    bool* truncated;
  };
  std::array<Stream, 2> streams{Stream{&out_pipe[0], &call.stdout_text, &call.stdout_truncated},
                                Stream{&err_pipe[0], &call.stderr_text, &call.stderr_truncated}};
  ProgressWatch watch(options, start);
  Clock::time_point deadline = watch.deadline();
  bool kill_pending = false;
  Clock::time_point kill_at = start;
  // At `now`: the deadline as progress moved it, and SIGTERM to the group once it has passed.
  const auto enforce_deadline = [&](Clock::time_point now) {
    deadline = watch.update(now);
    if (call.timed_out || now < deadline) return;
    call.timed_out = true;
    call.deadline_capped = watch.capped(now);
    ::kill(-pid, SIGTERM);
    kill_at = now + options.kill_grace;
    kill_pending = true;
  };
  char buf[65536];
  while (streams[0].fd->get() >= 0 || streams[1].fd->get() >= 0) {
    const auto now = Clock::now();
    enforce_deadline(now);
    if (kill_pending && now >= kill_at) {
      ::kill(-pid, SIGKILL);
      kill_pending = false;
      // Descendants that escaped the group may still hold the pipes: stop reading.
      break;
    }
    const auto until = kill_pending ? kill_at : deadline;
    const int wait_ms = static_cast<int>(std::max<std::int64_t>(
        1, std::chrono::duration_cast<std::chrono::milliseconds>(until - now).count()));
    pollfd fds[2];
    int n = 0;
    for (auto& s : streams)
      if (s.fd->get() >= 0) fds[n++] = {s.fd->get(), POLLIN, 0};
    const int pr = ::poll(fds, n, std::min(wait_ms, watch.active() ? 250 : 1000));
    if (pr < 0 && errno != EINTR)
      throw InfraError(fmt::format("subprocess: poll failed: {}", std::strerror(errno)));
    for (auto& s : streams) {
      if (s.fd->get() < 0) continue;
      pollfd* p = nullptr;
      for (int i = 0; i < n; ++i)
        if (fds[i].fd == s.fd->get()) p = &fds[i];
      if (!p || !(p->revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t got = ::read(s.fd->get(), buf, sizeof buf);
      if (got <= 0) {
        if (got < 0 && errno == EINTR) continue;
        s.fd->reset();
        continue;
      }
      const std::size_t room = options.output_cap - std::min(options.output_cap, s.text->size());
      s.text->append(buf, std::min<std::size_t>(room, static_cast<std::size_t>(got)));
      if (static_cast<std::size_t>(got) > room) *s.truncated = true;
    }
  }

  // Reap; if the child still lingers after its pipes closed, the deadline still applies.
  int status = 0;
  rusage usage{};
  for (;;) {
    const pid_t w = ::wait4(pid, &status, WNOHANG, &usage);
    if (w == pid) break;
    if (w < 0 && errno != EINTR)
      throw InfraError(fmt::format("subprocess: wait4 failed: {}", std::strerror(errno)));
    const auto now = Clock::now();
    enforce_deadline(now);
    if (kill_pending && now >= kill_at) {
      ::kill(-pid, SIGKILL);
      kill_pending = false;
    }
    ::usleep(2000);
  }
  guard.reaped();
  call.progress_changes = watch.changes();
  ::kill(-pid, SIGKILL); // anything left in the group (the leader is gone) goes too
  call.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (WIFEXITED(status)) call.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) call.term_signal = WTERMSIG(status);
  call.user_cpu_ms = ms_of(usage.ru_utime);
  call.sys_cpu_ms = ms_of(usage.ru_stime);
  call.max_rss_kib = usage.ru_maxrss;
  call.stdout_sha256 = store::sha256_hex(call.stdout_text);
  call.stderr_sha256 = store::sha256_hex(call.stderr_text);
  return call;
}

std::string self_exe_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw InfraError("cannot read /proc/self/exe: " + ec.message());
  return exe.parent_path().string();
}

std::string worker_path(const std::string& name) {
  std::string dir;
  if (const char* env = std::getenv("KLOOP_WORKER_DIR"); env && *env)
    dir = env;
  else
    dir = self_exe_dir();
  const std::string path = dir + "/" + name;
  if (::access(path.c_str(), X_OK) != 0)
    throw InfraError(fmt::format("worker executable {} not found or not executable; build the "
                                 "'{}' target (it is installed next to kloop)",
                                 path, name));
  return path;
}

std::string data_path(const std::string& relative) {
  std::string dir;
  if (const char* env = std::getenv("KLOOP_DATA_DIR"); env && *env)
    dir = env;
  else
    dir = self_exe_dir() + "/../share/kloop";
  const std::string path = std::filesystem::path(dir + "/" + relative).lexically_normal().string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    throw InfraError(
        fmt::format("kloop data {} not found (kloop looks in <its bin>/../share/kloop, "
                    "or $KLOOP_DATA_DIR); reinstall with `cmake --install BUILD "
                    "--prefix PREFIX`, or rebuild to stage BUILD/share/kloop",
                    path));
  return path;
}

} // namespace kloop::evaluator
