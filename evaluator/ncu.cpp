// Measured DRAM traffic through Nsight Compute (ncu.h).
#include "evaluator/ncu.h"

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>

#include "evaluator/gate.h"
#include "evaluator/gpu_runner.h"
#include "evaluator/sanitizer.h"
#include "store/hash.h"

namespace kloop::evaluator::ncu {
namespace {

// Splits one CSV line (RFC 4180 quoting: "a","b ""c""",d). Returns false for an unterminated
// quote.
bool split_csv(std::string_view line, std::vector<std::string>* out) {
  out->clear();
  std::string field;
  bool quoted = false, in_quotes = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_quotes) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        in_quotes = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      in_quotes = quoted = true;
    } else if (c == ',') {
      out->push_back(std::move(field));
      field.clear();
      quoted = false;
    } else if (c != '\r') {
      field += c;
    }
  }
  (void)quoted;
  out->push_back(std::move(field));
  return !in_quotes;
}

// "1,073,741,824" or "1.07" -> number; nullopt for "n/a" and other text.
std::optional<double> parse_number(std::string text) {
  std::string digits;
  for (char c : text)
    if (c != ',' && c != ' ') digits += c;
  if (digits.empty()) return std::nullopt;
  std::size_t used = 0;
  try {
    const double v = std::stod(digits, &used);
    if (used != digits.size() || !std::isfinite(v)) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Per launch: metric -> value in base units.
using Launch = std::map<std::string, double>;

} // namespace

std::string find_ncu(const char* path_env) {
  if (path_env != nullptr) {
    std::string_view rest(path_env);
    while (!rest.empty()) {
      const auto colon = rest.find(':');
      const std::string dir(rest.substr(0, colon));
      rest = colon == std::string_view::npos ? std::string_view() : rest.substr(colon + 1);
      if (dir.empty() || dir.front() != '/') continue; // relative entries are never trusted
      const std::string candidate = dir + "/ncu";
      if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  const char* fallback = "/usr/local/cuda/bin/ncu";
  return ::access(fallback, X_OK) == 0 ? fallback : "";
}

std::optional<double> to_base_units(double value, std::string_view unit) {
  static const std::map<std::string_view, double> kScale = {
      {"byte", 1},         {"B", 1},
      {"Kbyte", 1e3},      {"Mbyte", 1e6},
      {"Gbyte", 1e9},      {"Tbyte", 1e12},
      {"KB", 1024.0},      {"MB", 1048576.0},
      {"GB", 1 << 30},     {"KiB", 1024.0},
      {"MiB", 1048576.0},  {"GiB", 1 << 30},
      {"Kibyte", 1024},    {"Mibyte", 1048576},
      {"Gibyte", 1 << 30}, {"nsecond", 1},
      {"ns", 1},           {"usecond", 1e3},
      {"us", 1e3},         {"msecond", 1e6},
      {"ms", 1e6},         {"second", 1e9},
      {"s", 1e9}};
  const auto it = kScale.find(unit);
  if (it == kScale.end()) return std::nullopt;
  return value * it->second;
}

ParseResult parse_csv(std::string_view text) {
  ParseResult out;
  std::vector<std::string> header, fields;
  int id_col = -1, kernel_col = -1, name_col = -1, unit_col = -1, value_col = -1;
  std::map<std::string, Launch> launches; // by "ID"
  std::vector<std::string> order;         // IDs in first-seen order
  std::map<std::string, std::string> kernel_of;
  std::istringstream lines{std::string(text)};
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty() || line.rfind("==", 0) == 0 || line.front() != '"') continue;
    if (!split_csv(line, &fields)) continue;
    if (header.empty()) {
      for (int i = 0; i < static_cast<int>(fields.size()); ++i) {
        const std::string& f = fields[static_cast<std::size_t>(i)];
        if (f == "ID") id_col = i;
        if (f == "Kernel Name") kernel_col = i;
        if (f == "Metric Name") name_col = i;
        if (f == "Metric Unit") unit_col = i;
        if (f == "Metric Value") value_col = i;
      }
      if (id_col >= 0 && name_col >= 0 && unit_col >= 0 && value_col >= 0) header = fields;
      continue;
    }
    if (fields.size() != header.size()) continue; // a wrapped or foreign line
    const std::string& id = fields[static_cast<std::size_t>(id_col)];
    const std::string& metric = fields[static_cast<std::size_t>(name_col)];
    const std::string& unit = fields[static_cast<std::size_t>(unit_col)];
    const auto value = parse_number(fields[static_cast<std::size_t>(value_col)]);
    if (!value) {
      out.error = fmt::format("launch {}: metric {} has no numeric value ('{}')", id, metric,
                              fields[static_cast<std::size_t>(value_col)]);
      return out;
    }
    const auto base = to_base_units(*value, unit);
    if (!base) {
      out.error = fmt::format("launch {}: metric {} has unit '{}' that kloop does not convert; "
                              "extend ncu::to_base_units",
                              id, metric, unit);
      return out;
    }
    if (!launches.count(id)) order.push_back(id);
    launches[id][metric] = *base;
    if (kernel_col >= 0) kernel_of[id] = fields[static_cast<std::size_t>(kernel_col)];
  }
  if (header.empty()) {
    out.error = text.find("No kernels were profiled") != std::string_view::npos
                    ? "no kernel was profiled (the kernel-name filter matched no launch)"
                    : "no CSV header with \"ID\", \"Metric Name\", \"Metric Unit\", \"Metric "
                      "Value\" in the ncu output";
    return out;
  }
  if (order.empty()) {
    out.error = "no kernel was profiled (the CSV has a header but no metric rows)";
    return out;
  }
  Measured m;
  for (const std::string& id : order) {
    const Launch& l = launches[id];
    for (const char* key :
         {"dram__bytes_read.sum", "dram__bytes_write.sum", "gpu__time_duration.sum"}) {
      if (!l.count(key)) {
        out.error = fmt::format("launch {} reported no {}", id, key);
        return out;
      }
    }
    m.read_bytes += l.at("dram__bytes_read.sum");
    m.write_bytes += l.at("dram__bytes_write.sum");
    m.duration_ns += l.at("gpu__time_duration.sum");
    ++m.launches;
  }
  m.read_bytes /= m.launches;
  m.write_bytes /= m.launches;
  m.duration_ns /= m.launches;
  m.kernel = kernel_of.count(order.front()) ? kernel_of[order.front()] : std::string();
  out.measured = m;
  return out;
}

std::vector<std::string> command(const std::string& ncu_path, const std::string& kernel_name,
                                 const std::string& log_path,
                                 const std::vector<std::string>& worker_argv) {
  std::vector<std::string> argv{
      ncu_path,     "--clock-control", "none",      "--metrics",      std::string(kMetrics),
      "--csv",      "--kernel-name",   kernel_name, "--launch-count", std::to_string(kLaunchCount),
      "--log-file", log_path};
  argv.insert(argv.end(), worker_argv.begin(), worker_argv.end());
  return argv;
}

nlohmann::json not_run(const std::string& reason) {
  return {{"status", "not_run"}, {"reason", reason}};
}

nlohmann::json evidence_from_run(const ToolCall& call, const std::string& report_text,
                                 const std::string& tool_version,
                                 std::int64_t logical_unique_bytes) {
  nlohmann::json ev{{"tool_version", tool_version},
                    {"command", call.argv},
                    {"exit_code", call.exit_code},
                    {"timed_out", call.timed_out},
                    {"wall_ms", call.wall_ms},
                    {"report_sha256", store::sha256_hex(report_text)},
                    {"logical_unique_bytes", logical_unique_bytes},
                    {"note", "measured by ncu with its default cache control (caches flushed "
                             "before each profiled launch); logical bytes are the seed's formula"}};
  auto failed = [&](const std::string& reason) {
    ev["status"] = "failed";
    ev["reason"] = reason;
    return ev;
  };
  if (call.timed_out)
    return failed(fmt::format("ncu ran past its deadline ({:.0f} ms)", call.wall_ms));
  if (call.term_signal != 0) return failed(fmt::format("ncu ended by signal {}", call.term_signal));
  const ParseResult parsed = parse_csv(report_text);
  if (call.exit_code != 0)
    return failed(fmt::format("ncu exited with code {}{}{}", call.exit_code,
                              parsed.error.empty() ? "" : "; ", parsed.error));
  if (!parsed.measured) return failed(parsed.error);
  const Measured& m = *parsed.measured;
  ev["status"] = "ok";
  ev["read_bytes"] = m.read_bytes;
  ev["write_bytes"] = m.write_bytes;
  ev["duration_ns"] = m.duration_ns;
  ev["launches"] = m.launches;
  ev["kernel"] = m.kernel;
  if (logical_unique_bytes > 0) {
    const double logical = static_cast<double>(logical_unique_bytes);
    ev["ratio_measured_over_logical"] = (m.read_bytes + m.write_bytes) / logical;
  }
  if (m.duration_ns > 0)
    ev["measured_tbps"] = (m.read_bytes + m.write_bytes) / (m.duration_ns * 1e-9) / 1e12;
  return ev;
}

nlohmann::json run_measured_dram(const RunConfig& config, const ProcessRunner& runner,
                                 std::vector<ToolCall>* calls) {
  if (config.ncu_path.empty()) return not_run("ncu not found");
  if (config.kernel_name.empty()) return not_run("the candidate has no entry point for the shape");
  SubprocessOptions opts;
  opts.cwd = config.work_dir;
  opts.env = {{"PATH", "/usr/local/cuda/bin:/usr/bin:/bin"},
              {"HOME", config.work_dir},
              {"TMPDIR", config.work_dir}};
  opts.deadline = std::chrono::milliseconds(10000);
  opts.output_cap = 1 << 16;
  const std::string log = config.work_dir + "/ncu.csv";
  try {
    ToolCall version = runner({config.ncu_path, "--version"}, opts);
    version.detail.update({{"tool", "ncu"}, {"mode", "version"}}); // keeps the runner's keys
    const std::string tool_version =
        sanitizer::parse_version(version.stdout_text + version.stderr_text);
    if (calls) calls->push_back(version);
    opts.deadline = config.deadline;
    ::unlink(log.c_str());
    ToolCall call =
        runner(command(config.ncu_path, config.kernel_name, log, config.worker_argv), opts);
    std::string text = read_text(log);
    if (text.empty()) text = call.stdout_text + call.stderr_text;
    nlohmann::json ev = evidence_from_run(call, text, tool_version, config.logical_unique_bytes);
    call.detail.update({{"tool", "ncu"}, {"mode", "bench"}, {"status", ev["status"]}});
    if (!config.worker_result_path.empty()) {
      const nlohmann::json result =
          nlohmann::json::parse(read_text(config.worker_result_path), nullptr, false);
      call.detail["device_memory"] = device_memory_of(result);
      if (result.is_object() && result.contains("bench")) {
        const auto shapes = result["bench"].value("shapes", nlohmann::json::array());
        if (!shapes.empty()) ev["route"] = shapes.front().value("route", std::string());
      }
      if (ev["status"] == "failed" && ev.value("route", std::string("candidate")) != "candidate")
        ev["reason"] = ev["reason"].get<std::string>() +
                       "; the trusted wrapper routed the shape to " +
                       ev["route"].get<std::string>() + ", not the candidate";
    }
    if (calls) calls->push_back(std::move(call));
    return ev;
  } catch (const InfraError& e) {
    return {{"status", "failed"}, {"reason", std::string("ncu could not start: ") + e.what()}};
  }
}

} // namespace kloop::evaluator::ncu
