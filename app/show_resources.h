// Resource and measured-traffic lines of `kloop show` (issues 5 and 8): the kloop process's own
// peak RSS (session params "resources"), each candidate's GPU worker processes with their peak
// device memory (telemetry "device_memory", one row per worker process), and the roofline gate's
// optional measured DRAM traffic from ncu ("measured_dram"), always beside the logical bytes.
#pragma once

#include <string>

#include "store/store.h"

namespace kloop::app {

// "kloop peak RSS 123 MiB (kloop process only)\n", or "" when the session recorded none.
std::string session_resources_text(const store::SessionRecord& session);

// Indented lines for one candidate: "    GPU workers: 5 processes, peak device memory 1.5 GiB
// allocated (benchmark), 2.1 GiB used on the device\n" and "    measured DRAM (ncu, bfloat16
// 65536x4096): read 537 MB, write 537 MB per launch, 1.02x logical, 0.290 ms\n" (or the
// status and reason when not measured). "" when the candidate has neither.
std::string candidate_resources_text(const store::CandidateDetail& candidate);

} // namespace kloop::app
