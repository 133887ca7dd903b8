// `kloop show` resource lines (show_resources.h).
#include "app/show_resources.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "store/text_view.h"

namespace kloop::app {

std::string session_resources_text(const store::SessionRecord& session) {
  if (!session.params.is_object() || !session.params.contains("resources")) return "";
  const auto& r = session.params["resources"];
  if (!r.is_object() || !r.contains("kloop_peak_rss_kib")) return "";
  const double kib = store::number_at(r, "kloop_peak_rss_kib", -1);
  if (!(kib >= 0 && kib < 1e15)) // an edited row: say so instead of a number it never was
    return "kloop peak RSS: not a number of KiB in the record\n";
  return fmt::format("kloop peak RSS {:.0f} MiB (kloop process only, workers excluded)\n",
                     std::ceil(kib / 1024));
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
    const double alloc = store::number_at(mem, "peak_allocated_bytes");
    if (alloc > peak_alloc) {
      peak_alloc = alloc;
      peak_mode = store::string_at(t.data, "tool") + " " + store::string_at(t.data, "mode");
    }
    peak_used = std::max(peak_used, store::number_at(mem, "peak_used_bytes", -1.0));
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
    const auto shape = m.is_object() ? m.value("shape", nlohmann::json()) : nlohmann::json();
    const std::string where =
        fmt::format("{} {:.0f}x{:.0f}", store::string_at(shape, "dtype", "?"),
                    store::number_at(shape, "rows"), store::number_at(shape, "h"));
    if (store::string_at(m, "status") == "ok")
      out += fmt::format("    measured DRAM (ncu {}, {}): read {:.1f} MB, write {:.1f} MB per "
                         "launch = {:.3f}x logical, {:.4f} ms\n",
                         store::string_at(m, "tool_version", "?"), where,
                         store::number_at(m, "read_bytes") / 1e6,
                         store::number_at(m, "write_bytes") / 1e6,
                         store::number_at(m, "ratio_measured_over_logical"),
                         store::number_at(m, "duration_ns") / 1e6);
    else
      out += fmt::format("    measured DRAM (ncu, {}): {}: {}\n", where,
                         store::string_at(m, "status", "?"), store::string_at(m, "reason"));
  }
  return out;
}

} // namespace kloop::app
