#include "tests/store/fixture.h"

#include <fmt/core.h>

namespace kloop::store::testing {

std::int64_t write_fake_iteration(Store& st, std::int64_t session_id, int index, bool pass,
                                  bool full_evidence) {
  auto step = st.begin_step();
  IterationRecord it{.session_id = session_id, .index = index, .wall_ms = 1000.0 + index};
  step.add_iteration(it);
  PromptRecord p{.iteration_id = it.id,
                 .role = "full",
                 .blob_sha256 = step.put_blob(fmt::format("prompt for iteration {}", index)),
                 .tokens = 100};
  step.add_prompt(p);
  ResponseRecord r{.iteration_id = it.id,
                   .prompt_id = p.id,
                   .blob_sha256 = step.put_blob(fmt::format("response {}", index)),
                   .provider = "offline",
                   .model = "builtin-v1",
                   .http_status = 200,
                   .latency_ms = 12.5,
                   .retries = 0,
                   .prompt_tokens = 100,
                   .completion_tokens = 50};
  step.add_response(r);
  const double speedup = 1.0 + 0.25 * index;
  const std::string manifest =
      R"({"contract":"weighted_rmsnorm/1","entry_points":{"float32":"rms_f32"},)"
      R"("launch":{"block_threads":256,"rows_per_block":1,"grid":"per_rows",)"
      R"("dynamic_smem":{"fixed_bytes":0,"bytes_per_h":0}},"dispatch":{"h_min":1,)"
      R"("h_max":65536,"h_multiple_of":1,"x_rows":"any_stride","alignment_bytes":4},)"
      R"("target":"sm_90","known_limits":"none"})";
  CandidateRecord c{.iteration_id = it.id,
                    .source_sha256 = step.put_blob(fmt::format("// kernel {}\n", index)),
                    .manifest_sha256 = step.put_blob(manifest),
                    .verdict = pass ? VerdictCode::kPass : VerdictCode::kReject,
                    .speedup = speedup,
                    .speedup_lo = speedup - 0.05,
                    .speedup_hi = speedup + 0.05};
  step.add_candidate(c);
  ArtifactRecord cubin{.iteration_id = it.id,
                       .candidate_id = c.id,
                       .kind = ArtifactKind::kCubin,
                       .name = "kernel.cubin"};
  step.add_artifact(cubin, fmt::format("CUBIN-{}", index));
  ArtifactRecord ptx{.iteration_id = it.id,
                     .candidate_id = c.id,
                     .kind = ArtifactKind::kPtx,
                     .name = "kernel.ptx"};
  step.add_artifact(ptx, fmt::format(".version 9.0 // {}", index));
  ArtifactRecord cases{.iteration_id = it.id,
                       .candidate_id = c.id,
                       .kind = ArtifactKind::kCaseResults,
                       .name = "cases.json"};
  step.add_artifact(cases, fmt::format("[{{\"case\":{}}}]", index));
  const char* gates[kGatesPerCandidate] = {"contract",  "build",     "static",  "correctness",
                                           "sanitizer", "benchmark", "roofline"};
  for (int g = 0; g < kGatesPerCandidate; ++g) {
    GateRecord gr{.candidate_id = c.id, .ordinal = g, .name = gates[g]};
    const bool fails_here = !pass && g == 3;
    gr.status =
        (!pass && g > 3) ? GateCode::kNotRun : (fails_here ? GateCode::kFail : GateCode::kPass);
    if (fails_here) gr.reason = "max abs error 0.5 > 0.01 at width 4099";
    if (full_evidence) {
      if (g == 1) gr.evidence = {{"flags", {"-arch=sm_90", "-lineinfo"}}};
      if (g == 3)
        gr.evidence = {{"suite_sha256", std::string(64, 'a')},
                       {"reference_sha256", std::string(64, 'b')}};
      if (g == 4) gr.evidence = {{"tool_version", "2025.3.1.0"}};
      if (g == 5)
        gr.evidence = {{"protocol_sha256", std::string(64, 'c')},
                       {"baseline", "in-tree baseline r1, fp32"},
                       {"timing_scope", "cuda events; kernel; warm and cold L2"}};
    }
    step.add_gate(gr);
  }
  for (int k = 0; k < kCasesPerCandidate; ++k) {
    TestCaseRecord tc{.candidate_id = c.id,
                      .gate = "correctness",
                      .name = fmt::format("width_{}", 127 + k),
                      .status = (!pass && k == 0) ? GateCode::kFail : GateCode::kPass,
                      .detail = {{"max_abs_err", 0.001 * k}}};
    step.add_test_case(tc);
  }
  ToolCallRecord san{.iteration_id = it.id,
                     .candidate_id = c.id,
                     .tool = "compute-sanitizer", // the loop records no version per run:
                                                  // the gate's evidence has it (g == 4)
                     .argv = {"compute-sanitizer", "--tool", "memcheck", "--error-exitcode", "1"},
                     .cwd = "/tmp",
                     .exit_code = 0,
                     .wall_ms = 900,
                     .user_ms = 800,
                     .sys_ms = 50,
                     .max_rss_kb = 200000,
                     .stdout_sha256 = step.put_blob(fmt::format("memcheck report {}", index))};
  step.add_tool_call(san);
  BenchmarkRecord b{.candidate_id = c.id,
                    .series = "kernel_warm",
                    .samples_sha256 = step.put_blob(fmt::format("[10.{0},10.{0},11.0]", index)),
                    .count = 3,
                    .median_us = 10.5,
                    .lo_us = 10.0,
                    .hi_us = 11.0};
  step.add_benchmark(b);
  TelemetryRecord roof{.candidate_id = c.id,
                       .kind = "roofline",
                       .data = {{"achieved_gbps", 1500.0 + 100 * index},
                                {"ceiling_gbps", 4000.0},
                                {"arith_intensity", 0.5}}};
  step.add_telemetry(roof);
  TelemetryRecord stalls{.candidate_id = c.id,
                         .kind = "stall_reasons",
                         .data = {{"long_scoreboard", 40 + index}, {"barrier", 10}}};
  step.add_telemetry(stalls);
  if (full_evidence) {
    // What the loop writes per GPU worker process (agent/loop_record.cpp).
    for (const char* mode : {"correctness", "benchmark"}) {
      TelemetryRecord mem{.candidate_id = c.id,
                          .kind = "device_memory",
                          .data = {{"mode", mode},
                                   {"tool", "kloop-gpu-worker"},
                                   {"device_memory",
                                    {{"peak_allocated_bytes", 8423936},
                                     {"peak_used_bytes", 573374464},
                                     {"total_bytes", 150109880320}}},
                                   {"max_rss_kib", 129240}}};
      step.add_telemetry(mem);
    }
  }
  step.commit();
  return c.id;
}

std::int64_t write_fake_session(Store& st, int iterations, const std::string& provider,
                                const std::string& model, bool with_device) {
  SessionRecord s{.operator_name = "weighted_rmsnorm",
                  .contract_version = "1",
                  .contract_sha256 = std::string(64, 'd'),
                  .provider = provider,
                  .model = model,
                  .budget = iterations,
                  .seed = 42,
                  .kloop_version = "0.1.0",
                  .kloop_commit = "abc123",
                  .toolkit_version = "13.0",
                  .driver_version = with_device ? "580.65" : "",
                  .device_name = with_device ? "NVIDIA H200" : "",
                  .device_uuid = with_device ? "GPU-1234" : "",
                  .device_arch = "sm_90"};
  st.create_session(s);
  // The sealed holdout's commitment, recorded before the first iteration (agent/loop_record.cpp).
  HoldoutCommitmentRecord hc{
      .session_id = s.id, .commitment_sha256 = std::string(64, 'e'), .suite_version = "h1"};
  {
    auto step = st.begin_step();
    step.add_holdout_commitment(hc);
    step.commit();
  }
  std::int64_t last = 0;
  for (int i = 0; i < iterations; ++i)
    last = write_fake_iteration(st, s.id, i, i == iterations - 1);
  auto step = st.begin_step();
  // The frozen candidate's one holdout run, as agent/loop_finish.cpp records it.
  HoldoutRunRecord hr{
      .commitment_id = hc.id,
      .candidate_id = last,
      .status = GateCode::kPass,
      .result = {{"status", "pass"}, {"passed", 48}, {"failed", 0}, {"commitment_verified", true}},
      .report_sha256 = step.put_blob(R"({"cases":48,"failed":[]})"),
      .retired = true};
  step.add_holdout_run(hr);
  PromotionRecord pr{.session_id = s.id,
                     .candidate_id = last,
                     .decision = Decision::kPromoted,
                     .reason = "all hard gates passed",
                     .evidence = {{"rollout",
                                   {{"feature_flag_and_scope", "rmsnorm_fast: 1% canary"},
                                    {"healthy_worker_recovery_and_reference_target",
                                     "fresh worker; reference kernel"},
                                    {"revalidation_policy", "on driver or toolkit change"}}}}};
  step.add_promotion(pr);
  step.commit();
  st.finish_session(s.id, SessionStatus::kCompleted, VerdictCode::kPass);
  return s.id;
}

} // namespace kloop::store::testing
