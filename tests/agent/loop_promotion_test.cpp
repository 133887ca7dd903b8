// The promotion path of the refinement loop (agent/loop.h, run_loop) on the CPU with fakes at the
// loop's boundaries: freeze -> unseal -> holdout -> promote / reject / pending, and the recorded
// state after each. The provider replies with the good fixture kernel; the evaluator's public
// report carries the benchmark and roofline gates computed by their own code
// (evaluator/perf_gates.h) from a synthetic worker result; the holdout runner answers with a
// scripted status; the store and the sealed holdout folder are real (temp folders).
#include <atomic>
#include <deque>
#include <functional>
#include <optional>
#include <stdexcept>

#include <gtest/gtest.h>

#include "agent/loop.h"
#include "evaluator/perf_gates.h"
#include "holdout/holdout.h"
#include "kernels/manifest.h"
#include "kernels/rmsnorm/operator.h"
#include "store/phase_view.h"
#include "store/store.h"
#include "tests/support/bench_result.h"
#include "tests/support/test_files.h"

namespace kloop::agent {
namespace {

namespace fs = std::filesystem;
using evaluator::GateResult;
using evaluator::GateStatus;
using nlohmann::json;
using test_support::read_file;
using test_support::synthetic_bench_result;
using test_support::synthetic_bench_shape;
using test_support::TempDir;

const fs::path kGood = fs::path(KLOOP_SOURCE_DIR) / "tests/evaluator/fixtures/good";
const std::string kCubin = "\x7f"
                           "ELF fake cubin"; // the build's artifact (never loaded here)

std::string good_manifest() {
  return read_file(kGood / "manifest.json");
}
// The good manifest with a restricted dispatch domain (contiguous rows, H a multiple of 128).
std::string restricted_manifest() {
  json m = json::parse(good_manifest());
  m["dispatch"]["x_rows"] = "contiguous";
  m["dispatch"]["h_multiple_of"] = 128;
  return m.dump();
}

std::string reply_with(const std::string& manifest) {
  return "Here it is.\n\n```cuda\n" + read_file(kGood / "kernel.cu") + "\n```\n\n```json\n" +
         manifest + "\n```\n";
}

// Replies in order (the last one repeats); counts calls.
class ScriptedProvider final : public Provider {
public:
  explicit ScriptedProvider(std::vector<std::string> replies) : replies_(std::move(replies)) {}
  std::string name() const override { return "fake"; }
  ProviderResponse complete(const ProviderRequest& request) override {
    requests.push_back(request);
    ProviderResponse r;
    r.exchange.provider = "fake";
    if (unreachable_call && calls == *unreachable_call) { // as HttpJsonProvider reports it
      r.outcome = ProviderOutcome::kTransport;
      r.error = "unreachable: POST http://127.0.0.1:1/v1/chat/completions failed (connect_error)";
      r.exchange.error = r.error;
      r.stop_session = true;
      ++calls;
      return r;
    }
    r.text = replies_.at(std::min(calls, replies_.size() - 1));
    ++calls;
    return r;
  }
  std::size_t calls = 0;
  std::optional<std::size_t> unreachable_call; // this call fails, and asking again would too
  std::vector<ProviderRequest> requests;       // every request, in order

private:
  std::vector<std::string> replies_;
};

// The benchmark timings one candidate shows against the baseline: (cand_ms, base_ms) per shape.
using Timings = std::vector<std::pair<double, double>>;
const Timings kFaster = {{0.33, 0.36}, {0.085, 0.09}};     // 1.09x and 1.06x: geomean 1.07x
const Timings kSlowerOnOne = {{0.24, 0.36}, {0.10, 0.09}}; // 1.5x and 0.9x: geomean 1.16x

// Every public gate passes; the benchmark and roofline gates come from their own code.
evaluator::Evaluation passing_evaluation(const Timings& timings) {
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{65536, 4096}, {16384, 4096}};
  json worker = json::array();
  for (std::size_t i = 0; i < timings.size(); ++i)
    worker.push_back(synthetic_bench_shape(shapes[i].first, shapes[i].second, "bfloat16",
                                           timings[i].first, timings[i].second));
  const json bench = synthetic_bench_result(worker);
  evaluator::Evaluation ev;
  for (const std::string_view g :
       {evaluator::kGateContract, evaluator::kGateBuild, evaluator::kGateStatic,
        evaluator::kGateCorrectness, evaluator::kGateSanitizer})
    ev.report.gates.push_back({std::string(g), GateStatus::kPass, "", json::object()});
  ev.report.gates.push_back(evaluator::perf::benchmark_gate(rmsnorm::declaration(), bench));
  ev.report.gates.push_back(evaluator::perf::roofline_gate(rmsnorm::declaration(), bench));
  ev.report.verdict = evaluator::decide_verdict(ev.report.gates);
  evaluator::BuildResult b;
  b.gate = ev.report.gates[1];
  b.cubin = kCubin;
  b.ptx = "// fake ptx";
  ev.build = b;
  return ev;
}

// One evaluation per call, in order; `before` runs first (to tamper, cancel, ...).
class ScriptedEvaluator final : public CandidateEvaluator {
public:
  explicit ScriptedEvaluator(std::vector<Timings> script) : script_(std::move(script)) {}
  evaluator::Evaluation evaluate(const evaluator::Candidate& candidate) override {
    (void)candidate;
    if (before) before(calls);
    evaluator::Evaluation ev = passing_evaluation(script_.at(calls++));
    // Phases as the pipeline records them (evaluator/phases.h), for the store's breakdown.
    ev.phases = {{"build", 0, 1200, "", false, json::object()},
                 {"correctness:public", 1300, 4000, "0", false, json::object()},
                 {"worker_start", 1300, 600, "0", true, {{"mode", "correctness"}}},
                 {"sanitizer:memcheck", 5300, 700, "0", false, json::object()},
                 {"sanitizer:racecheck", 6000, 1800, "0", false, json::object()},
                 {"sanitizer:initcheck", 6000, 900, "0", false, json::object()},
                 {"benchmark", 5300, 20000, "0", false, json::object()},
                 {"benchmark:streaming:cold",
                  5300,
                  3000,
                  "0",
                  true,
                  {{"states", 4}, {"rounds", 120}, {"stop", {{"noise", 3}, {"time_cap", 1}}}}}};
    ev.wall_ms = 25300;
    return ev;
  }
  std::function<void(std::size_t)> before;
  std::size_t calls = 0;

private:
  std::vector<Timings> script_;
};

// Answers the holdout with `status`; records what it was given.
class FakeHoldoutRunner final : public HoldoutRunner {
public:
  explicit FakeHoldoutRunner(GateStatus status, std::string reason = "")
      : status_(status), reason_(std::move(reason)) {}
  holdout::HoldoutResult run(const op::Operator& op, const evaluator::Candidate& candidate,
                             const std::string& cubin,
                             const std::vector<nlohmann::json>& suite) override {
    ++calls;
    if (crash) throw std::runtime_error("the process died during the holdout run");
    manifest_text = candidate.manifest_text;
    dispatch = op::dispatch_predicate_text(
        op.declaration(), *op::parse_manifest(op.declaration(), manifest_text).manifest);
    got_cubin = cubin;
    got_suite = suite;
    holdout::HoldoutResult r;
    r.status = status_;
    r.reason = reason_;
    r.passed = status_ == GateStatus::kPass ? static_cast<std::int64_t>(suite.size()) : 0;
    r.failed = status_ == GateStatus::kFail ? 1 : 0;
    return r;
  }
  int calls = 0;
  bool crash = false;
  std::string manifest_text, dispatch, got_cubin;
  std::vector<nlohmann::json> got_suite;

private:
  GateStatus status_;
  std::string reason_;
};

// Collects the progress lines; throws once when a line starts with `throw_at` (a process that
// stops right after that point).
class Lines final : public ProgressSink {
public:
  void line(const std::string& text) override {
    lines.push_back(text);
    if (!throw_at.empty() && text.rfind(throw_at, 0) == 0) {
      throw_at.clear();
      throw std::runtime_error("stopped after: " + text);
    }
  }
  std::string throw_at;
  std::vector<std::string> lines;
};

class LoopPromotionTest : public ::testing::Test {
protected:
  LoopOptions options(int budget) const {
    LoopOptions o;
    o.op = &rmsnorm::operator_instance();
    o.budget = budget;
    o.provider_name = "fake";
    o.holdout_dir = tmp_.dir() / "holdout";
    o.export_dir = tmp_.dir() / "exports";
    o.holdout_options = holdout::SuiteOptions{8, 400'000};
    o.kloop_version = "test";
    o.kloop_commit = "test";
    return o;
  }
  LoopResult run(const LoopOptions& o, Provider& p, CandidateEvaluator& e, HoldoutRunner& h,
                 ProgressSink& progress) {
    return run_loop(o, p, e, h, store_, progress, cancel_);
  }
  LoopResult run(const LoopOptions& o, Provider& p, CandidateEvaluator& e, HoldoutRunner& h) {
    Lines lines;
    return run(o, p, e, h, lines);
  }
  fs::path sealed(std::int64_t id, const char* ext) const {
    return tmp_.dir() / "holdout" / ("session-" + std::to_string(id) + ext);
  }
  // The commitment the store recorded when the session began.
  std::string recorded_commitment(std::int64_t id) {
    const auto d = store_.load_session(id);
    EXPECT_EQ(d.holdout_commitments.size(), 1u);
    return d.holdout_commitments.empty() ? "" : d.holdout_commitments.back().commitment_sha256;
  }
  // A process that stopped: what `mark_interrupted` does for a dead owner, so --resume may run.
  void stopped(std::int64_t id) {
    store_.finish_session(id, store::SessionStatus::kInterrupted, std::nullopt);
  }

  TempDir tmp_{"loop"};
  store::Store store_ = store::Store::open((tmp_.dir() / "store").string());
  std::atomic<bool> cancel_{false};
};

TEST_F(LoopPromotionTest, AFasterCandidateThatPassesTheHoldoutIsPromotedWithItsReceipt) {
  ScriptedProvider provider({reply_with(good_manifest())});
  ScriptedEvaluator evaluator({kFaster});
  FakeHoldoutRunner holdout(GateStatus::kPass);
  const LoopResult r = run(options(1), provider, evaluator, holdout);
  ASSERT_EQ(r.decision, "promoted") << r.reason;
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.frozen_iteration, 0);
  // The holdout ran once, on the frozen candidate's files, with the suite of the sealed seed.
  ASSERT_EQ(holdout.calls, 1);
  EXPECT_EQ(json::parse(holdout.manifest_text), json::parse(good_manifest()));
  EXPECT_EQ(holdout.got_cubin, kCubin);
  ASSERT_TRUE(r.holdout);
  EXPECT_EQ(holdout.got_suite,
            holdout::generate_suite(rmsnorm::operator_instance(), r.holdout->revealed_seed,
                                    options(1).holdout_options));
  // Retired, verified against the store's commitment, and that commitment is in the receipt.
  EXPECT_FALSE(fs::exists(sealed(r.session_id, ".sealed")));
  EXPECT_TRUE(fs::exists(sealed(r.session_id, ".retired")));
  const std::string commitment = recorded_commitment(r.session_id);
  EXPECT_EQ(r.holdout_commitment, commitment);
  EXPECT_EQ(r.holdout->commitment, commitment);
  const auto d = store_.load_session(r.session_id);
  ASSERT_EQ(d.holdout_runs.size(), 1u);
  EXPECT_EQ(d.holdout_runs[0].status, store::GateCode::kPass);
  EXPECT_EQ(d.holdout_runs[0].result["commitment_verified"], true);
  EXPECT_TRUE(d.holdout_runs[0].retired);
  ASSERT_TRUE(d.promotion);
  EXPECT_EQ(d.promotion->decision, store::Decision::kPromoted);
  EXPECT_EQ(d.session.status, store::SessionStatus::kCompleted);
  EXPECT_EQ(d.session.verdict, store::VerdictCode::kPass);
  const json receipt = json::parse(read_file(r.receipt_file));
  EXPECT_EQ(receipt["payload"]["holdout"]["commitment_sha256"], commitment) << receipt.dump(1);
  EXPECT_EQ(receipt["payload"]["holdout"]["commitment_verified"], true) << receipt.dump(1);
  EXPECT_EQ(read_file(fs::path(r.export_dir) / "kernel.cubin"), holdout.got_cubin);
}

TEST_F(LoopPromotionTest, AHoldoutFailureRejectsAndRetiresTheSuite) {
  ScriptedProvider provider({reply_with(good_manifest())});
  ScriptedEvaluator evaluator({kFaster});
  FakeHoldoutRunner holdout(GateStatus::kFail,
                            "case holdout-3 failed: 12 elements out of tolerance");
  const LoopResult r = run(options(1), provider, evaluator, holdout);
  EXPECT_EQ(r.decision, "rejected") << r.reason;
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.reason.find("holdout failed: case holdout-3"), std::string::npos) << r.reason;
  EXPECT_EQ(holdout.calls, 1);
  EXPECT_TRUE(fs::exists(sealed(r.session_id, ".retired")));
  EXPECT_FALSE(fs::exists(sealed(r.session_id, ".sealed")));
  const auto d = store_.load_session(r.session_id);
  ASSERT_EQ(d.holdout_runs.size(), 1u);
  EXPECT_EQ(d.holdout_runs[0].status, store::GateCode::kFail);
  EXPECT_TRUE(d.holdout_runs[0].retired);
  ASSERT_TRUE(d.promotion);
  EXPECT_EQ(d.promotion->decision, store::Decision::kRejected);
  EXPECT_EQ(d.session.verdict, store::VerdictCode::kReject);
  EXPECT_TRUE(r.export_dir.empty());
  EXPECT_FALSE(fs::exists(tmp_.dir() / "exports"));
}

TEST_F(LoopPromotionTest, AHoldoutThatCannotRunLeavesTheSessionPending) {
  ScriptedProvider provider({reply_with(good_manifest())});
  ScriptedEvaluator evaluator({kFaster});
  FakeHoldoutRunner holdout(GateStatus::kNotRun, "no CUDA device: cudaErrorNoDevice");
  const LoopResult r = run(options(1), provider, evaluator, holdout);
  EXPECT_EQ(r.decision, "pending_device_validation") << r.reason;
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.reason.find("holdout could not run: no CUDA device"), std::string::npos) << r.reason;
  const auto d = store_.load_session(r.session_id);
  ASSERT_TRUE(d.promotion);
  EXPECT_EQ(d.promotion->decision, store::Decision::kPendingDeviceValidation);
  EXPECT_EQ(d.session.verdict, store::VerdictCode::kPendingDeviceValidation);
  ASSERT_EQ(d.holdout_runs.size(), 1u);
  EXPECT_EQ(d.holdout_runs[0].status, store::GateCode::kNotRun);
  EXPECT_TRUE(r.export_dir.empty());
}

TEST_F(LoopPromotionTest, EqualSpeedUpsFreezeTheSimplerDispatchDomain) {
  // Iteration 1 has a restricted domain, iteration 2 the unrestricted one; same timings.
  ScriptedProvider provider({reply_with(restricted_manifest()), reply_with(good_manifest())});
  ScriptedEvaluator evaluator({kFaster, kFaster});
  FakeHoldoutRunner holdout(GateStatus::kPass);
  const LoopResult r = run(options(2), provider, evaluator, holdout);
  ASSERT_EQ(r.decision, "promoted") << r.reason;
  EXPECT_EQ(r.frozen_iteration, 1) << "the later, simpler candidate";
  ASSERT_EQ(r.iterations.size(), 2u);
  ASSERT_TRUE(r.iterations[0].speedup && r.iterations[1].speedup);
  EXPECT_DOUBLE_EQ(*r.iterations[0].speedup, *r.iterations[1].speedup) << "a tie";
  EXPECT_EQ(json::parse(holdout.manifest_text), json::parse(good_manifest()));
  EXPECT_EQ(holdout.dispatch.find("contiguous"), std::string::npos) << holdout.dispatch;
  const auto d = store_.load_session(r.session_id);
  ASSERT_TRUE(d.promotion && d.promotion->candidate_id);
  EXPECT_EQ(*d.promotion->candidate_id, d.iterations[1].candidates[0].candidate.id);
}

TEST_F(LoopPromotionTest, FasterOnAverageButSlowerOnOneStateIsNotPromoted) {
  ScriptedProvider provider({reply_with(good_manifest())});
  ScriptedEvaluator evaluator({kSlowerOnOne});
  FakeHoldoutRunner holdout(GateStatus::kPass);
  const LoopResult r = run(options(1), provider, evaluator, holdout);
  ASSERT_EQ(r.iterations.size(), 1u);
  ASSERT_TRUE(r.iterations[0].speedup);
  EXPECT_GT(*r.iterations[0].speedup, 1.05) << "faster in geometric mean";
  EXPECT_EQ(r.decision, "rejected") << r.reason;
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.reason.find("does not clear the A/A noise floor"), std::string::npos) << r.reason;
  EXPECT_EQ(holdout.calls, 1) << "frozen and held out, then refused on the public evidence";
  const auto d = store_.load_session(r.session_id);
  bool slower_state = false;
  for (const auto& g : d.iterations[0].candidates[0].candidate.report["gates"])
    if (g["name"] == "benchmark") slower_state = g["evidence"]["summary"]["slower"] == 1;
  EXPECT_TRUE(slower_state) << "the benchmark gate itself found the slower state";
  EXPECT_TRUE(r.export_dir.empty());
}

TEST_F(LoopPromotionTest, ACandidateThatClearsTheFloorIsFrozenBeforeAFasterOneThatDoesNot) {
  ScriptedProvider provider({reply_with(good_manifest())});
  ScriptedEvaluator evaluator({kSlowerOnOne, kFaster});
  FakeHoldoutRunner holdout(GateStatus::kPass);
  const LoopResult r = run(options(2), provider, evaluator, holdout);
  ASSERT_EQ(r.iterations.size(), 2u);
  EXPECT_GT(*r.iterations[0].speedup, *r.iterations[1].speedup);
  EXPECT_EQ(r.frozen_iteration, 1);
  EXPECT_EQ(r.decision, "promoted") << r.reason;
}

// A process that stopped after the holdout run was recorded but before the decision: the resume
// decides from the record and never runs the holdout again.
TEST_F(LoopPromotionTest, ResumeAfterTheHoldoutRunDecidesFromItsRecord) {
  ScriptedProvider provider({reply_with(good_manifest())});
  ScriptedEvaluator evaluator({kFaster});
  FakeHoldoutRunner holdout(GateStatus::kPass);
  Lines lines;
  lines.throw_at = "holdout: pass";
  EXPECT_THROW(run(options(1), provider, evaluator, holdout, lines), std::runtime_error);
  ASSERT_EQ(holdout.calls, 1);
  const std::int64_t id = 1;
  ASSERT_EQ(store_.load_session(id).holdout_runs.size(), 1u);
  EXPECT_FALSE(store_.load_session(id).promotion);
  stopped(id);

  LoopOptions o = options(1);
  o.resume_session = id;
  ScriptedProvider provider2({reply_with(good_manifest())});
  ScriptedEvaluator evaluator2({});
  FakeHoldoutRunner holdout2(GateStatus::kFail); // would reject, were it asked
  const LoopResult r = run(o, provider2, evaluator2, holdout2);
  EXPECT_EQ(r.decision, "promoted") << r.reason;
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(provider2.calls, 0u);
  EXPECT_EQ(evaluator2.calls, 0u);
  EXPECT_EQ(holdout2.calls, 0) << "a holdout runs once";
  const auto d = store_.load_session(id);
  EXPECT_EQ(d.holdout_runs.size(), 1u);
  ASSERT_TRUE(d.promotion);
  EXPECT_EQ(d.promotion->decision, store::Decision::kPromoted);
  EXPECT_EQ(d.session.status, store::SessionStatus::kCompleted);
}

// A process that died during the holdout run: the suite was retired first, nothing was recorded,
// so the resumed session cannot run it again and ends failed (no verdict), saying why.
TEST_F(LoopPromotionTest, ResumeAfterAnUnrecordedHoldoutRunEndsFailedWithoutRunningItAgain) {
  ScriptedProvider provider({reply_with(good_manifest())});
  ScriptedEvaluator evaluator({kFaster});
  FakeHoldoutRunner holdout(GateStatus::kPass);
  holdout.crash = true;
  EXPECT_THROW(run(options(1), provider, evaluator, holdout), std::runtime_error);
  const std::int64_t id = 1;
  EXPECT_TRUE(fs::exists(sealed(id, ".retired")));
  stopped(id);

  LoopOptions o = options(1);
  o.resume_session = id;
  ScriptedEvaluator evaluator2({});
  FakeHoldoutRunner holdout2(GateStatus::kPass);
  const LoopResult r = run(o, provider, evaluator2, holdout2);
  EXPECT_EQ(r.decision, "failed") << r.reason;
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.reason.find("is retired; a holdout runs once"), std::string::npos) << r.reason;
  EXPECT_EQ(holdout2.calls, 0);
  const auto d = store_.load_session(id);
  EXPECT_EQ(d.session.status, store::SessionStatus::kFailed);
  EXPECT_FALSE(d.promotion);
  EXPECT_TRUE(d.holdout_runs.empty());
  EXPECT_NE(d.session.params.value("holdout_error", "").find("is retired"), std::string::npos);
}

// Issue 23: the sealed file's seed and commitment edited together while the session was stopped.
// The resume checks the file against the commitment the store recorded when the session began:
// the session ends failed before any further generation, and the holdout never runs.
TEST_F(LoopPromotionTest, ResumeRefusesASealedFileWhoseSeedAndCommitmentWereEditedTogether) {
  ScriptedProvider provider({reply_with(good_manifest())});
  ScriptedEvaluator evaluator({kFaster, kFaster});
  evaluator.before = [&](std::size_t call) {
    if (call == 0) cancel_ = true; // Ctrl-C during the first iteration
  };
  FakeHoldoutRunner holdout(GateStatus::kPass);
  const LoopResult first = run(options(2), provider, evaluator, holdout);
  ASSERT_EQ(first.decision, "interrupted") << first.reason;
  cancel_ = false;
  const std::int64_t id = first.session_id;
  const std::string recorded = recorded_commitment(id);

  const fs::path file = sealed(id, ".sealed");
  json body = json::parse(read_file(file));
  const std::uint64_t chosen = 42;
  body["seed"] = std::to_string(chosen);
  body["commitment"] = holdout::commitment_for(
      rmsnorm::operator_instance(),
      holdout::generate_suite(rmsnorm::operator_instance(), chosen, options(2).holdout_options),
      chosen);
  std::ofstream(file, std::ios::trunc) << body.dump();

  LoopOptions o = options(2);
  o.resume_session = id;
  const LoopResult r = run(o, provider, evaluator, holdout);
  EXPECT_EQ(r.decision, "failed") << r.reason;
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.reason.find("does not carry the commitment the store recorded"), std::string::npos)
      << r.reason;
  EXPECT_EQ(holdout.calls, 0);
  EXPECT_EQ(provider.calls, 1u) << "no generation after the refusal";
  const auto d = store_.load_session(id);
  EXPECT_EQ(d.session.status, store::SessionStatus::kFailed);
  EXPECT_FALSE(d.promotion);
  EXPECT_EQ(recorded_commitment(id), recorded) << "the store's record is unchanged";
}

// The same edit made while the session runs (after sealing, before the freeze): unsealing checks
// the suite against the store's commitment, so the session ends failed, recorded, never promoted.
TEST_F(LoopPromotionTest, ASealedFileEditedDuringTheSessionIsRefusedAtTheFreeze) {
  ScriptedProvider provider({reply_with(good_manifest())});
  ScriptedEvaluator evaluator({kFaster});
  evaluator.before = [&](std::size_t) {
    const fs::path file = sealed(1, ".sealed");
    json body = json::parse(read_file(file));
    body["seed"] = "42";
    body["commitment"] = holdout::commitment_for(
        rmsnorm::operator_instance(),
        holdout::generate_suite(rmsnorm::operator_instance(), 42, options(1).holdout_options), 42);
    std::ofstream(file, std::ios::trunc) << body.dump();
  };
  FakeHoldoutRunner holdout(GateStatus::kPass);
  const LoopResult r = run(options(1), provider, evaluator, holdout);
  EXPECT_EQ(r.decision, "failed") << r.reason;
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.reason.find("does not match the commitment the store recorded"), std::string::npos)
      << r.reason;
  EXPECT_EQ(holdout.calls, 0);
  const auto d = store_.load_session(r.session_id);
  EXPECT_EQ(d.session.status, store::SessionStatus::kFailed);
  EXPECT_FALSE(d.promotion);
  EXPECT_TRUE(fs::exists(sealed(r.session_id, ".retired"))) << "the attempt counts as its use";
}

// ---- candidates per iteration (issue 26) ----

// K = 2: four replies over two iterations, recorded as two candidates per iteration in order; the
// second iteration's requests carry both first-iteration replies and the feedback on both; the
// freeze looks at every candidate; each candidate keeps its phase record.
TEST_F(LoopPromotionTest, SeveralCandidatesPerIterationAreRecordedInOrderAndFedBackTogether) {
  ScriptedProvider provider({reply_with(good_manifest()), reply_with(restricted_manifest()),
                             reply_with(restricted_manifest()), reply_with(good_manifest())});
  ScriptedEvaluator evaluator({kSlowerOnOne, kFaster, kSlowerOnOne, kSlowerOnOne});
  FakeHoldoutRunner holdout(GateStatus::kPass);
  LoopOptions o = options(2);
  o.candidates_per_iteration = 2;
  const LoopResult r = run(o, provider, evaluator, holdout);
  ASSERT_EQ(r.decision, "promoted") << r.reason;
  ASSERT_EQ(r.iterations.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(r.iterations[i].index, static_cast<int>(i / 2));
    EXPECT_EQ(r.iterations[i].candidate, static_cast<int>(i % 2));
  }
  EXPECT_EQ(r.frozen_iteration, 0) << "the one that clears the floor: iteration 1, candidate 2";
  ASSERT_EQ(provider.requests.size(), 4u);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(provider.requests[i].candidate, static_cast<int>(i % 2));
    EXPECT_EQ(provider.requests[i].candidates, 2);
  }
  const ProviderRequest& second = provider.requests[2];
  ASSERT_EQ(second.messages.size(), 3u);
  EXPECT_NE(second.messages[1].content.find("### Candidate 1 of 2"), std::string::npos);
  EXPECT_NE(second.messages[1].content.find("### Candidate 2 of 2"), std::string::npos);
  EXPECT_NE(second.messages[1].content.find("\"x_rows\":\"contiguous\""), std::string::npos)
      << "the second reply (restricted manifest) is in the assistant turn";
  EXPECT_NE(second.messages[2].content.find("candidate 1 of 2: summary"), std::string::npos);
  EXPECT_NE(second.messages[2].content.find("candidate 2 of 2: summary"), std::string::npos);
  EXPECT_EQ(prompt_sha256(provider.requests[2]), prompt_sha256(provider.requests[3]));

  const auto d = store_.load_session(r.session_id);
  ASSERT_EQ(d.iterations.size(), 2u);
  for (const auto& it : d.iterations) {
    ASSERT_EQ(it.candidates.size(), 2u);
    EXPECT_EQ(it.responses.size(), 2u);
    EXPECT_EQ(it.candidates[0].candidate.ordinal, 0);
    EXPECT_EQ(it.candidates[1].candidate.ordinal, 1);
    EXPECT_EQ(it.iteration.notes["candidates"], 2);
  }
  EXPECT_EQ(json::parse(store_.blob(d.iterations[0].candidates[1].candidate.manifest_sha256)),
            json::parse(restricted_manifest()));
  ASSERT_TRUE(d.promotion && d.promotion->candidate_id);
  EXPECT_EQ(*d.promotion->candidate_id, d.iterations[0].candidates[1].candidate.id);
  // Every candidate's phases, and the session's totals (store/phase_view.h).
  const store::PhaseSummary sum = store::phase_summary(d);
  EXPECT_EQ(sum.candidates, 4);
  EXPECT_DOUBLE_EQ(sum.wall_ms, 4 * 25300.0);
  const auto row = [&](const std::string& name) {
    for (const auto& t : sum.totals)
      if (t.name == name) return t;
    ADD_FAILURE() << "no row " << name;
    return store::PhaseTotal{};
  };
  EXPECT_DOUBLE_EQ(row("benchmark").total_ms, 4 * 20000.0);
  EXPECT_EQ(row("benchmark:streaming:cold").states, 16);
  EXPECT_EQ(row("benchmark:streaming:cold").rounds, 480);
  EXPECT_EQ(row("benchmark:streaming:cold").stop["noise"], 12);
  EXPECT_TRUE(row("worker_start").nested);
  // Each sanitizer tool and each correctness suite has its own row under its group.
  EXPECT_DOUBLE_EQ(row("sanitizer").total_ms, 4 * 3400.0);
  EXPECT_EQ(row("sanitizer").runs, 12);
  EXPECT_TRUE(row("sanitizer:racecheck").nested);
  EXPECT_DOUBLE_EQ(row("sanitizer:racecheck").total_ms, 4 * 1800.0);
  EXPECT_EQ(row("sanitizer:racecheck").candidates, 4);
  EXPECT_DOUBLE_EQ(row("correctness:public").total_ms, 4 * 4000.0);
  EXPECT_EQ(
      store::candidate_phase_text(d.iterations[1].candidates[0]),
      "    time 25.3 s: build 1.20 s, correctness 4.00 s, sanitizer 3.40 s, benchmark 20.00 s\n");
  EXPECT_NE(store::phase_summary_text(d).find("benchmark:streaming:cold"), std::string::npos);
  EXPECT_TRUE(d.to_json()["phase_summary"]["totals"].is_array());
}

// K = 2, the second request of iteration 1 fails in a way asking again would repeat (issue 22 item
// 9): the iteration is recorded with its evaluated candidate and the failed exchange, each
// candidate's reply notes under "replies", and the session stops failed and resumable.
TEST_F(LoopPromotionTest, AProviderFailureThatWouldRepeatStopsASessionOfSeveralCandidates) {
  ScriptedProvider provider({reply_with(good_manifest())});
  provider.unreachable_call = 1;
  ScriptedEvaluator evaluator({kFaster, kFaster, kFaster});
  FakeHoldoutRunner holdout(GateStatus::kPass);
  LoopOptions o = options(3);
  o.candidates_per_iteration = 2;
  const LoopResult r = run(o, provider, evaluator, holdout);
  EXPECT_EQ(r.decision, "failed") << r.reason;
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(provider.calls, 2u) << "no request of iteration 2 is sent";
  EXPECT_EQ(evaluator.calls, 1u);
  EXPECT_NE(r.reason.find("iteration 1 (candidate 2) would fail the same way"), std::string::npos)
      << r.reason;
  EXPECT_NE(r.reason.find("--resume " + std::to_string(r.session_id)), std::string::npos)
      << r.reason;
  ASSERT_EQ(r.iterations.size(), 2u);
  EXPECT_EQ(r.iterations[0].verdict, "pass");
  EXPECT_EQ(r.iterations[1].verdict, "provider_error");
  EXPECT_EQ(holdout.calls, 0);

  const auto d = store_.load_session(r.session_id);
  EXPECT_EQ(d.session.status, store::SessionStatus::kFailed);
  EXPECT_TRUE(d.holdout_runs.empty());
  ASSERT_EQ(d.iterations.size(), 1u);
  const auto& it = d.iterations.front();
  EXPECT_EQ(it.candidates.size(), 1u);
  EXPECT_EQ(it.responses.size(), 2u);
  const json& replies = it.iteration.notes["replies"];
  ASSERT_TRUE(replies.is_array() && replies.size() == 2u) << it.iteration.notes.dump();
  EXPECT_EQ(replies[0]["reply_outcome"], "ok");
  EXPECT_EQ(replies[0]["usage"]["status"], "reported");
  EXPECT_FALSE(replies[1].contains("reply_outcome")) << "no reply reached the format gate";
}

// A resumed session of K = 2 builds its next prompt from both candidates of its last committed
// iteration.
TEST_F(LoopPromotionTest, AResumedSessionFeedsBackEveryCandidateOfItsLastIteration) {
  ScriptedProvider provider({reply_with(good_manifest()), reply_with(restricted_manifest())});
  ScriptedEvaluator evaluator({kFaster, kFaster, kFaster, kFaster});
  evaluator.before = [&](std::size_t call) {
    if (call == 1) cancel_ = true; // Ctrl-C while the first iteration's second candidate runs
  };
  FakeHoldoutRunner holdout(GateStatus::kPass);
  LoopOptions o = options(2);
  o.candidates_per_iteration = 2;
  const LoopResult first = run(o, provider, evaluator, holdout);
  ASSERT_EQ(first.decision, "interrupted") << first.reason;
  ASSERT_EQ(first.iterations.size(), 2u) << "both candidates of iteration 1 were evaluated";
  cancel_ = false;
  evaluator.before = nullptr;
  o.resume_session = first.session_id;
  const LoopResult r = run(o, provider, evaluator, holdout);
  EXPECT_EQ(r.decision, "promoted") << r.reason;
  ASSERT_EQ(provider.requests.size(), 4u);
  const std::string& feedback = provider.requests[2].messages.at(2).content;
  EXPECT_NE(feedback.find("candidate 1 of 2: summary"), std::string::npos) << feedback;
  EXPECT_NE(feedback.find("candidate 2 of 2: summary"), std::string::npos) << feedback;
}

} // namespace
} // namespace kloop::agent
