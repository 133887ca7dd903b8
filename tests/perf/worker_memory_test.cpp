// Every GPU worker process is a recorded tool call with its peak device memory (issue 8): the
// runner's reading of result.json "device_memory", the ToolCall detail, the Recorder writing one
// tool_calls row per process plus a "device_memory" telemetry row tied to it, `kloop show`'s
// lines, and the session's kloop peak-RSS parameter.
#include <gtest/gtest.h>

#include <filesystem>

#include "agent/loop_record.h"
#include "app/show_resources.h"
#include "evaluator/gpu_runner.h"
#include "evaluator/subprocess.h"
#include "store/error.h"
#include "store/store.h"
#include "tests/support/test_files.h"

namespace kloop {
namespace {

namespace fs = std::filesystem;

const nlohmann::json kMemory = {{"peak_allocated_bytes", 1610612736},
                                {"allocated_bytes", 0},
                                {"allocations", 12},
                                {"total_bytes", 150000000000},
                                {"used_before_bytes", 600000000},
                                {"used_after_bytes", 600000000},
                                {"min_free_bytes", 147000000000},
                                {"peak_used_bytes", 3000000000}};

TEST(WorkerMemoryTest, RunnerKeepsAWellFormedDeviceMemoryReport) {
  const nlohmann::json result = {{"status", "pass"}, {"device_memory", kMemory}};
  EXPECT_EQ(evaluator::device_memory_of(result), kMemory);
}

TEST(WorkerMemoryTest, MissingOrMalformedDeviceMemoryIsNullNeverAnException) {
  EXPECT_TRUE(evaluator::device_memory_of(nullptr).is_null());
  EXPECT_TRUE(evaluator::device_memory_of({{"status", "pass"}}).is_null());
  EXPECT_TRUE(evaluator::device_memory_of({{"device_memory", "lots"}}).is_null());
  EXPECT_TRUE(evaluator::device_memory_of({{"device_memory", {{"allocations", 1}}}}).is_null());
  nlohmann::json negative = kMemory;
  negative["min_free_bytes"] = -5;
  EXPECT_TRUE(evaluator::device_memory_of({{"device_memory", negative}}).is_null());
  nlohmann::json text = kMemory;
  text["peak_allocated_bytes"] = "1 GiB";
  EXPECT_TRUE(evaluator::device_memory_of({{"device_memory", text}}).is_null());
}

TEST(WorkerMemoryTest, WorkerToolCallCarriesModeStatusAndDeviceMemory) {
  evaluator::GpuRunResult run = evaluator::classify_gpu_run(
      evaluator::kGpuWorkerOk, 0, false, {{"status", "fail"}, {"device_memory", kMemory}}, nullptr);
  run.device_memory = evaluator::device_memory_of(run.result);
  evaluator::ToolCall call;
  call.argv = {"/usr/bin/unshare", "-n", "/bin/kloop-gpu-worker", "/tmp/req"};
  call.max_rss_kib = 81234;
  call = evaluator::worker_tool_call(call, "correctness", run);
  EXPECT_EQ(call.detail["tool"], "kloop-gpu-worker");
  EXPECT_EQ(call.detail["mode"], "correctness");
  EXPECT_EQ(call.detail["status"], "fail");
  EXPECT_EQ(call.detail["device_memory"], kMemory);
  EXPECT_EQ(call.to_json()["detail"], call.detail);
  run.call = call;
  const nlohmann::json j = run.to_json();
  EXPECT_EQ(j["device_memory"], kMemory);
  EXPECT_EQ(j["max_rss_kib"], 81234);
}

TEST(WorkerMemoryTest, SelfPeakRssIsPositive) {
  EXPECT_GT(evaluator::self_max_rss_kib(), 0);
}

using test_support::TempDir;

evaluator::ToolCall process(std::vector<std::string> argv, nlohmann::json detail, long rss) {
  evaluator::ToolCall c;
  c.argv = std::move(argv);
  c.exit_code = 0;
  c.wall_ms = 42;
  c.max_rss_kib = rss;
  c.stderr_text = "kloop-gpu-worker: pass";
  c.detail = std::move(detail);
  return c;
}

// One iteration of a new session recorded through the loop's Recorder; returns the session id.
std::int64_t record_one_iteration(store::Store& st, const evaluator::Evaluation& ev) {
  store::SessionRecord s{.operator_name = "weighted_rmsnorm", .provider = "offline"};
  st.create_session(s);
  agent::ProviderRequest request;
  request.system = "sys";
  request.messages = {{"user", "write a kernel"}};
  agent::ProviderResponse response;
  response.text = "reply";
  const evaluator::Candidate candidate{"__global__ void k() {}", "{}", 0, 0};
  agent::Recorder rec(st);
  rec.iteration(s.id, 0, request, response, candidate, true, ev, ev.report, 1.5);
  return s.id;
}

TEST(WorkerMemoryTest, RecorderStoresEveryProcessAndTiesDeviceMemoryToItsRow) {
  TempDir t;
  store::Store st = store::Store::open(t.path());
  evaluator::Evaluation ev;
  ev.report.verdict = evaluator::Verdict::kReject;
  ev.report.gates = {{"roofline",
                      evaluator::GateStatus::kPass,
                      "",
                      {{"measured_dram",
                        {{"status", "ok"},
                         {"read_bytes", 536870912.0},
                         {"write_bytes", 536870912.0},
                         {"duration_ns", 290000.0},
                         {"ratio_measured_over_logical", 1.0},
                         {"tool_version", "2025.3.1.0"},
                         {"shape", {{"rows", 65536}, {"h", 4096}, {"dtype", "bfloat16"}}}}}}}};
  ev.tool_calls = {
      process({"/usr/bin/bwrap", "kloop-build-worker"}, nlohmann::json::object(), 50000),
      process({"/usr/bin/unshare", "-n", "/b/kloop-gpu-worker", "/tmp/r"},
              {{"tool", "kloop-gpu-worker"},
               {"mode", "correctness"},
               {"status", "pass"},
               {"device_memory", kMemory}},
              90000),
      process({"/usr/local/cuda/bin/compute-sanitizer", "--version"},
              {{"tool", "compute-sanitizer"}, {"mode", "version"}}, 3000),
      process({"/usr/local/cuda/bin/compute-sanitizer", "--tool", "memcheck"},
              {{"tool", "compute-sanitizer"},
               {"mode", "sanitize"},
               {"sanitizer_tool", "memcheck"},
               {"device_memory", nullptr}},
              120000)};
  const auto d = st.load_session(record_one_iteration(st, ev));
  ASSERT_EQ(d.iterations.size(), 1u);
  ASSERT_EQ(d.iterations[0].candidates.size(), 1u);
  const auto& c = d.iterations[0].candidates[0];
  ASSERT_EQ(c.tool_calls.size(), 4u);
  EXPECT_EQ(c.tool_calls[0].tool, "/usr/bin/bwrap"); // no detail: argv[0] as before
  EXPECT_EQ(c.tool_calls[1].tool, "kloop-gpu-worker");
  EXPECT_EQ(c.tool_calls[1].argv.front(), "/usr/bin/unshare");
  EXPECT_EQ(c.tool_calls[1].max_rss_kb, 90000);
  EXPECT_EQ(c.tool_calls[1].exit_code, 0);
  EXPECT_DOUBLE_EQ(c.tool_calls[1].wall_ms, 42);
  EXPECT_EQ(c.tool_calls[3].tool, "compute-sanitizer");
  std::vector<const store::TelemetryRecord*> mem;
  for (const auto& tel : c.telemetry)
    if (tel.kind == "device_memory") mem.push_back(&tel);
  ASSERT_EQ(mem.size(), 2u); // the worker and the sanitized worker; not bwrap, not --version
  EXPECT_EQ(mem[0]->data["tool_call_id"], c.tool_calls[1].id);
  EXPECT_EQ(mem[0]->data["device_memory"]["peak_allocated_bytes"], 1610612736);
  EXPECT_EQ(mem[0]->data["mode"], "correctness");
  EXPECT_EQ(mem[1]->data["tool_call_id"], c.tool_calls[3].id);
  EXPECT_TRUE(mem[1]->data["device_memory"].is_null());

  const std::string text = app::candidate_resources_text(c);
  EXPECT_NE(text.find("GPU workers: 2 process(es)"), std::string::npos) << text;
  EXPECT_NE(text.find("peak device memory 1536.0 MiB allocated (kloop-gpu-worker correctness)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("measured DRAM (ncu 2025.3.1.0, bfloat16 65536x4096): read 536.9 MB"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("1.000x logical"), std::string::npos) << text;
}

TEST(WorkerMemoryTest, RecorderKeepsTheCorrectnessCaseResultsAsABlobAndAnArtifact) {
  TempDir t;
  store::Store st = store::Store::open(t.path());
  const nlohmann::json cases = {{{"case_name", "P5-tiny-row-float32"}, {"pass", true}},
                                {{"case_name", "P8-offset-float16"}, {"pass", true}}};
  evaluator::Evaluation ev;
  ev.report.verdict = evaluator::Verdict::kPass;
  ev.report.gates = {{"correctness",
                      evaluator::GateStatus::kPass,
                      "",
                      {{"suite", {{"passed", 2}, {"failed", 0}}}, {"raw_case_results", cases}}}};
  const auto d = st.load_session(record_one_iteration(st, ev));
  const auto& c = d.iterations.at(0).candidates.at(0);
  const auto* a = c.artifact_of(store::ArtifactKind::kCaseResults);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->name, "case_results.json");
  EXPECT_EQ(nlohmann::json::parse(st.blob(a->sha256)), cases);
  // Inline, the gate keeps only the blob reference (large evidence goes to blobs).
  const auto* g = c.gate("correctness");
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->evidence["raw_case_results"]["blob"], a->sha256);
  EXPECT_EQ(g->evidence["suite"]["passed"], 2);
}

TEST(WorkerMemoryTest, SessionParamRecordsPeakRssAndShowPrintsIt) {
  TempDir t;
  store::Store st = store::Store::open(t.path());
  store::SessionRecord s{.operator_name = "weighted_rmsnorm",
                         .provider = "offline",
                         .params = {{"base_url", "http://x"}}};
  st.create_session(s);
  EXPECT_EQ(app::session_resources_text(st.load_session(s.id).session), "");
  st.set_session_param(s.id, "resources", {{"kloop_peak_rss_kib", 123 * 1024}});
  const auto loaded = st.load_session(s.id).session;
  EXPECT_EQ(loaded.params["base_url"], "http://x"); // other parameters kept
  EXPECT_EQ(loaded.params["resources"]["kloop_peak_rss_kib"], 123 * 1024);
  EXPECT_NE(app::session_resources_text(loaded).find("kloop peak RSS 123 MiB"), std::string::npos);
  EXPECT_THROW(st.set_session_param(s.id + 99, "resources", 1), store::StoreError);
}

} // namespace
} // namespace kloop
