// Phase timings of one evaluation (phases.h).
#include "evaluator/phases.h"

#include <map>

namespace kloop::evaluator {
namespace {

using nlohmann::json;

double number(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : 0.0;
}

std::string text(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The phase name of one device process from its ToolCall detail; "" for a process that is not a
// device process (the build worker, the static tools).
std::string process_phase(const json& d) {
  const std::string tool = text(d, "tool"), mode = text(d, "mode");
  if (tool == "kloop-gpu-worker") {
    if (mode == "correctness") {
      const std::string suite = text(d, "suite");
      return suite.empty() ? "correctness" : "correctness:" + suite;
    }
    return mode.empty() ? "gpu-worker" : mode;
  }
  if (tool == "compute-sanitizer") {
    const std::string t = text(d, "sanitizer_tool");
    return "sanitizer:" + (mode == "version" ? std::string("version") : t.empty() ? "?" : t);
  }
  if (tool == "ncu") return mode == "version" ? "ncu:version" : "ncu";
  return "";
}

// The nested phases of a benchmark worker: setup, copy ceiling and one per (shape class, state).
void add_benchmark_phases(const json& t, const Phase& parent, std::vector<Phase>& out) {
  const auto nested = [&](std::string name, double ms, json detail) {
    Phase p{std::move(name), parent.start_ms, ms, parent.device, true, std::move(detail)};
    out.push_back(std::move(p));
  };
  if (t.contains("bench_setup_ms")) nested("benchmark:setup", number(t, "bench_setup_ms"), {});
  if (t.contains("copy_ceiling_ms"))
    nested("benchmark:copy_ceiling", number(t, "copy_ceiling_ms"), {});
  struct Group {
    double ms = 0;
    int states = 0;
    long rounds = 0, max_rounds = 0;
    std::map<std::string, int> stop;
  };
  std::map<std::string, Group> groups; // "class:state", in name order
  const auto states = t.find("bench_states");
  if (states == t.end() || !states->is_array()) return;
  for (const auto& s : *states) {
    if (!s.is_object()) continue;
    Group& g = groups[text(s, "shape_class") + ":" + text(s, "state")];
    g.ms += number(s, "ms");
    ++g.states;
    const long r = static_cast<long>(number(s, "rounds"));
    g.rounds += r;
    g.max_rounds = std::max(g.max_rounds, r);
    ++g.stop[text(s, "stop")];
  }
  for (const auto& [key, g] : groups)
    nested("benchmark:" + key, g.ms,
           {{"states", g.states},
            {"rounds", g.rounds},
            {"max_rounds", g.max_rounds},
            {"stop", g.stop}});
}

} // namespace

json Phase::to_json() const {
  return {{"name", name},     {"start_ms", start_ms}, {"wall_ms", wall_ms},
          {"device", device}, {"nested", nested},     {"detail", detail}};
}

Phase Phase::from_json(const json& j) {
  Phase p;
  if (!j.is_object()) return p;
  p.name = text(j, "name");
  p.start_ms = number(j, "start_ms");
  p.wall_ms = number(j, "wall_ms");
  p.device = text(j, "device");
  const auto n = j.find("nested");
  p.nested = n != j.end() && n->is_boolean() && n->get<bool>();
  const auto d = j.find("detail");
  if (d != j.end() && d->is_object()) p.detail = *d;
  return p;
}

double steady_now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void PhaseLog::add(Phase phase) {
  std::lock_guard<std::mutex> lock(mu_);
  phases_.push_back(std::move(phase));
}

void PhaseLog::add_since(const std::string& name, double started_ms, json detail) {
  Phase p;
  p.name = name;
  p.start_ms = started_ms - origin_ms_;
  p.wall_ms = steady_now_ms() - started_ms;
  p.detail = std::move(detail);
  add(std::move(p));
}

std::vector<Phase> PhaseLog::phases() const {
  std::lock_guard<std::mutex> lock(mu_);
  return phases_;
}

std::vector<Phase> phases_from_tool_calls(const std::vector<ToolCall>& calls, double origin_ms) {
  std::vector<Phase> out;
  for (const ToolCall& c : calls) {
    const json& d = c.detail;
    if (!d.is_object()) continue;
    const std::string name = process_phase(d);
    if (name.empty()) continue;
    const std::string device = text(d, "device");
    const double start = c.started_ms > 0 ? c.started_ms - origin_ms : 0.0;
    if (const double wait = number(d, "device_wait_ms"); wait > 0)
      out.push_back(Phase{"device_wait",
                          start - wait,
                          wait,
                          device,
                          false,
                          {{"work", text(d, "device_work")}, {"for", name}}});
    Phase p{name, start, c.wall_ms, device, false, json::object()};
    if (c.timed_out) p.detail["timed_out"] = true;
    if (const std::string status = text(d, "status"); !status.empty()) p.detail["status"] = status;
    out.push_back(p);
    const auto t = d.find("worker_timings");
    if (t == d.end() || !t->is_object()) continue;
    if (t->contains("context_ms") || t->contains("load_ms"))
      out.push_back(Phase{"worker_start",
                          start,
                          number(*t, "context_ms") + number(*t, "load_ms"),
                          device,
                          true,
                          {{"mode", text(d, "mode")},
                           {"context_ms", number(*t, "context_ms")},
                           {"load_ms", number(*t, "load_ms")}}});
    if (name == "benchmark") add_benchmark_phases(*t, p, out);
  }
  return out;
}

json phases_telemetry(const std::vector<Phase>& phases, double wall_ms) {
  json list = json::array();
  for (const Phase& p : phases)
    list.push_back(p.to_json());
  return {{"wall_ms", wall_ms}, {"phases", list}};
}

} // namespace kloop::evaluator
