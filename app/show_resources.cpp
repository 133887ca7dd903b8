// `kloop show` resource lines (show_resources.h).
#include "app/show_resources.h"

#include <algorithm>

#include <fmt/format.h>

namespace kloop::app {

std::string session_resources_text(const store::SessionRecord& session) {
  if (!session.params.is_object() || !session.params.contains("resources")) return "";
  const auto& r = session.params["resources"];
  if (!r.is_object() || !r.contains("kloop_peak_rss_kib")) return "";
  const long kib = r.value("kloop_peak_rss_kib", 0L);
  return fmt::format("kloop peak RSS {} MiB (kloop process only, workers excluded)\n",
                     (kib + 1023) / 1024);
}

std::string candidate_resources_text(const store::CandidateDetail& c) {
  std::string out;
  int processes = 0;
  double peak_alloc = -1, peak_used = -1;
  std::string peak_mode;
  for (const auto& t : c.telemetry) {
    if (t.kind != "device_memory" || !t.data.is_object()) continue;
    ++processes;
    const auto mem = t.data.value("device_memory", nlohmann::json());
    if (!mem.is_object()) continue;
    const double alloc = mem.value("peak_allocated_bytes", 0.0);
    if (alloc > peak_alloc) {
      peak_alloc = alloc;
      peak_mode = t.data.value("tool", std::string()) + " " + t.data.value("mode", std::string());
    }
    peak_used = std::max(peak_used, mem.value("peak_used_bytes", -1.0));
  }
  if (processes > 0) {
    out += fmt::format("    GPU workers: {} process(es)", processes);
    if (peak_alloc >= 0)
      out += fmt::format(", peak device memory {:.1f} MiB allocated ({})", peak_alloc / 1048576.0,
                         peak_mode);
    if (peak_used >= 0)
      out += fmt::format(", {:.1f} MiB used on the device at peak", peak_used / 1048576.0);
    out += "\n";
  }
  const store::GateRecord* roof = c.gate("roofline");
  if (roof != nullptr && roof->evidence.is_object() && roof->evidence.contains("measured_dram")) {
    const auto& m = roof->evidence["measured_dram"];
    const auto shape = m.value("shape", nlohmann::json::object());
    const std::string where = fmt::format("{} {}x{}", shape.value("dtype", std::string("?")),
                                          shape.value("rows", 0LL), shape.value("h", 0LL));
    if (m.value("status", std::string()) == "ok")
      out += fmt::format("    measured DRAM (ncu {}, {}): read {:.1f} MB, write {:.1f} MB per "
                         "launch = {:.3f}x logical, {:.4f} ms\n",
                         m.value("tool_version", std::string("?")), where,
                         m.value("read_bytes", 0.0) / 1e6, m.value("write_bytes", 0.0) / 1e6,
                         m.value("ratio_measured_over_logical", 0.0),
                         m.value("duration_ns", 0.0) / 1e6);
    else
      out += fmt::format("    measured DRAM (ncu, {}): {}: {}\n", where,
                         m.value("status", std::string("?")), m.value("reason", std::string()));
  }
  return out;
}

} // namespace kloop::app
