// An operator's offline generator (issue 25): its kernel family and policy behind one interface,
// so the offline provider (agent/offline_provider.h) serves every operator that has a family.
// The generator reads public reports (the JSON of evaluator::PublicReport) and returns family
// members as kernel.cu and manifest.json text; deterministic for a seed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kloop::op {

// One generated candidate.
struct OfflineCandidate {
  std::string kernel_cu;          // device source
  std::string manifest_json;      // the operator's manifest
  std::string name;               // the family member's canonical name
  std::string rationale;          // why this member (the policy's rules), for the record
  std::vector<std::string> rules; // the policy rules that chose it, e.g. {"first:safe_default"}
};

class OfflineGenerator {
public:
  virtual ~OfflineGenerator() = default;
  // The next member; `report` is the public report of the previous one (nullptr on the first
  // call or when none is available).
  virtual OfflineCandidate next(const nlohmann::json* report) = 0;
  // `count` distinct members at once (`--candidates-per-iteration`), from the reports of the
  // previous batch in its order (empty on the first call). With one report and count 1: next().
  virtual std::vector<OfflineCandidate>
  next_batch(const std::vector<const nlohmann::json*>& reports, int count) = 0;
  // The names of the members returned so far, oldest first.
  virtual std::vector<std::string> history() const = 0;
};

// The OfflineGenerator of a family whose Policy (constructed from a seed) has
// next(const json*) and next_batch(reports, count) returning decisions {variant, rules,
// rationale}; `emit` turns a decision into the candidate (the family's generate()).
template <typename Policy> class FamilyGenerator final : public OfflineGenerator {
public:
  using Decision = decltype(std::declval<Policy&>().next(nullptr));
  FamilyGenerator(std::uint64_t seed, std::function<OfflineCandidate(const Decision&)> emit)
      : policy_(seed), emit_(std::move(emit)) {}
  OfflineCandidate next(const nlohmann::json* report) override {
    return record(emit_(policy_.next(report)));
  }
  std::vector<OfflineCandidate> next_batch(const std::vector<const nlohmann::json*>& reports,
                                           int count) override {
    std::vector<OfflineCandidate> out;
    for (const Decision& d : policy_.next_batch(reports, count))
      out.push_back(record(emit_(d)));
    return out;
  }
  std::vector<std::string> history() const override { return names_; }

private:
  OfflineCandidate record(OfflineCandidate c) {
    names_.push_back(c.name);
    return c;
  }
  Policy policy_;
  std::function<OfflineCandidate(const Decision&)> emit_;
  std::vector<std::string> names_;
};

} // namespace kloop::op
