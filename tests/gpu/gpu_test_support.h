// Helpers of the GPU test tier: candidate loading from the source tree and the nvcc-built cubins
// (tests/gpu/CMakeLists.txt), and one-call worker runs through the real runner.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "evaluator/device_gates.h"
#include "evaluator/gpu_runner.h"
#include "tests/support/corpus_entries.h"
#include "tests/support/test_files.h"

namespace kloop::gputest {

using test_support::read_file;

// A candidate in the tree: kernels/<op>/<rel> (source, manifest) + its built cubin.
struct TreeCandidate {
  std::string name;
  std::string source;
  std::string manifest_text;
  std::string cubin;
  std::string ptx;
  nlohmann::json expect; // expect.json (corpus only)
};

// The candidate in `dir` (kernel.cu, manifest.json, expect.json when present) with the cubin and
// PTX that tests/gpu/CMakeLists.txt built into `bin_rel` below KLOOP_CORPUS_BIN (the device
// script carries the cubins in .device-bundle/corpus and points KLOOP_CORPUS_BIN there).
inline TreeCandidate load_candidate_built_at(const std::filesystem::path& dir,
                                             const std::string& bin_rel) {
  TreeCandidate c;
  c.name = dir.filename().string();
  c.source = read_file(dir / "kernel.cu");
  c.manifest_text = read_file(dir / "manifest.json");
  const char* env = std::getenv("KLOOP_CORPUS_BIN");
  const std::filesystem::path bin = std::filesystem::path(env ? env : KLOOP_CORPUS_BIN) / bin_rel;
  c.cubin = read_file(bin / "kernel.cubin");
  c.ptx = read_file(bin / "kernel.ptx");
  if (std::filesystem::exists(dir / "expect.json"))
    c.expect = nlohmann::json::parse(read_file(dir / "expect.json"));
  return c;
}

// `bin_prefix`: the folder of the built cubins below KLOOP_CORPUS_BIN ("precision/" for the
// precision corpus, empty for the defect corpus and the baseline).
inline TreeCandidate load_candidate(const std::filesystem::path& dir,
                                    const std::string& bin_prefix = "") {
  return load_candidate_built_at(dir, bin_prefix + dir.filename().string());
}

// A corpus entry of any operator (tests/support/corpus_entries.h) with its nvcc-built cubin.
inline TreeCandidate load_candidate(const test_support::CorpusEntry& e) {
  return load_candidate_built_at(e.dir, e.bin_dir());
}

inline std::filesystem::path tree(const std::string& rel) {
  return std::filesystem::path(KLOOP_SOURCE_DIR) / "kernels/rmsnorm" / rel;
}

// One correctness batch of `c` (or of the reference kernel alone when c is null) on `cases`, of
// the operator with contract id `operator_id` ("": the manifest's, else weighted_rmsnorm/1),
// watched as the correctness gate watches its batches (evaluator::GpuGatesOptions): a case may
// take at most `deadline`, the batch deadline_cap_factor times it, so a correct kernel slowed by
// other processes on the device is not judged hung.
inline evaluator::GpuRunResult run_correctness(const TreeCandidate* c, const nlohmann::json& cases,
                                               std::chrono::milliseconds deadline,
                                               nlohmann::json options = nlohmann::json::object(),
                                               const std::string& operator_id = "") {
  evaluator::GpuRunRequest req;
  req.mode = "correctness";
  req.operator_id = operator_id;
  if (c) {
    req.cubin = c->cubin;
    req.source = c->source;
    req.manifest = nlohmann::json::parse(c->manifest_text);
  }
  req.cases = cases;
  req.options = std::move(options);
  evaluator::GpuRunOptions opt;
  opt.deadline = deadline;
  opt.deadline_cap = deadline * evaluator::GpuGatesOptions{}.deadline_cap_factor;
  return evaluator::run_gpu_worker(req, opt);
}

// Short description for assertion messages.
inline std::string describe(const evaluator::GpuRunResult& r) {
  return r.to_json().dump() + "\nstderr: " + r.stderr_tail;
}

} // namespace kloop::gputest
