#include "feedback/feedback.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "feedback/sections.h"

namespace kloop::feedback {

using evaluator::GateStatus;

std::string FeedbackPayload::render() const {
  std::string out;
  for (const auto& s : sections) {
    if (!out.empty()) out += "\n";
    out += fmt::format("## {}\n{}", s.name, s.text);
    if (!s.text.empty() && s.text.back() != '\n') out += "\n";
  }
  return out;
}

nlohmann::json FeedbackPayload::to_json() const {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : sections)
    list.push_back({{"name", s.name}, {"text", s.text}, {"truncated", s.truncated}});
  return {{"verdict", verdict}, {"sections", list}};
}

std::string fit_to_budget(std::string_view text, std::size_t budget, bool* truncated) {
  if (truncated) *truncated = false;
  if (text.size() <= budget) return std::string(text);
  if (truncated) *truncated = true;
  // The marker's length depends on the count; 40 bytes always suffice.
  const std::size_t room = budget > 40 ? budget - 40 : 0;
  std::size_t cut = room;
  if (const auto nl = text.rfind('\n', room); nl != std::string_view::npos && nl > room / 2)
    cut = nl + 1;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut; // UTF-8
  std::string out(text.substr(0, cut));
  const std::string marker = fmt::format("[... {} bytes cut]\n", text.size() - cut);
  if (out.size() + marker.size() <= budget) out += marker;
  return out;
}

std::string redact_host_paths(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  std::size_t i = 0;
  auto token_char = [](char c) {
    return !(c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '"' || c == '\'' || c == '(' ||
             c == ')' || c == ',' || c == ';' || c == '<' || c == '>');
  };
  while (i < text.size()) {
    const bool starts = text[i] == '/' &&
                        (i == 0 || !token_char(text[i - 1]) || text[i - 1] == '=') &&
                        i + 1 < text.size() &&
                        (std::isalnum(static_cast<unsigned char>(text[i + 1])) ||
                         text[i + 1] == '_' || text[i + 1] == '.');
    if (!starts) {
      out.push_back(text[i++]);
      continue;
    }
    std::size_t j = i;
    while (j < text.size() && token_char(text[j]) && text[j] != ':')
      ++j;
    std::string_view path = text.substr(i, j - i);
    int segments = 0;
    for (std::size_t k = 0; k < path.size(); ++k)
      if (path[k] != '/' && (k == 0 || path[k - 1] == '/')) ++segments;
    if (segments < 2) {
      out.append(path);
    } else {
      out += "<path>";
      if (path.size() >= 10 && path.substr(path.size() - 10) == "/kernel.cu") out += "/kernel.cu";
    }
    i = j;
  }
  return out;
}

FeedbackPayload build_feedback(const evaluator::PublicReport& report,
                               const FeedbackOptions& options) {
  using namespace detail;
  const FeedbackBudgets& b = options.budgets;
  FeedbackPayload p;
  p.verdict = std::string(evaluator::verdict_name(report.verdict));
  auto add = [&](std::string name, const std::string& text, std::size_t budget) {
    if (text.empty()) return;
    FeedbackSection s;
    s.name = std::move(name);
    s.text = fit_to_budget(redact_host_paths(text), budget, &s.truncated);
    p.sections.push_back(std::move(s));
  };
  add("summary", summary_section(report), b.summary);
  if (const auto* g = report.find(evaluator::kGateFormat))
    add("format", format_section(*g), b.format);
  if (const auto* g = report.find(evaluator::kGateContract))
    add("contract", contract_section(*g), b.contract);
  if (const auto* g = report.find(evaluator::kGateBuild); g && g->status != GateStatus::kNotRun)
    add("build", build_section(*g), b.build);
  if (const auto* g = report.find(evaluator::kGateStatic); g && g->status != GateStatus::kNotRun)
    add("static", static_section(*g), b.static_inspection);
  if (const auto* g = report.find(evaluator::kGateCorrectness);
      g && g->status != GateStatus::kNotRun)
    add("correctness", correctness_section(*g), b.correctness);
  if (const auto* g = report.find(evaluator::kGateSanitizer); g && g->status != GateStatus::kNotRun)
    add("sanitizer", sanitizer_section(*g, options.kernel_source), b.sanitizer);
  auto ran = [](const evaluator::GateResult* g) {
    return g && g->status != GateStatus::kNotRun ? g : nullptr;
  };
  const auto* bench = ran(report.find(evaluator::kGateBenchmark));
  const auto* roof = ran(report.find(evaluator::kGateRoofline));
  if (bench || roof) add("benchmark", benchmark_section(bench, roof), b.benchmark);
  if (bench) {
    evaluator::evidence::Problems ignored; // named in the benchmark part already
    const auto read = evaluator::evidence::BenchmarkEvidence::read(bench->evidence, ignored);
    if (read.stalls)
      add("profile", profile_section(*read.stalls, options.kernel_source), b.profile);
  }
  return p;
}

FeedbackPayload build_batch_feedback(const std::vector<BatchEntry>& entries,
                                     const FeedbackBudgets& budgets) {
  std::vector<const BatchEntry*> used;
  for (const auto& e : entries)
    if (e.report) used.push_back(&e);
  if (used.size() == 1) {
    FeedbackOptions o;
    o.budgets = budgets;
    o.kernel_source = used.front()->kernel_source;
    return build_feedback(*used.front()->report, o);
  }
  const std::size_t n = std::max<std::size_t>(1, used.size());
  const auto share = [n](std::size_t b) { return std::max(kMinBatchSectionBytes, b / n); };
  FeedbackOptions o;
  o.budgets = {.summary = share(budgets.summary),
               .format = share(budgets.format),
               .contract = share(budgets.contract),
               .build = share(budgets.build),
               .static_inspection = share(budgets.static_inspection),
               .correctness = share(budgets.correctness),
               .sanitizer = share(budgets.sanitizer),
               .benchmark = share(budgets.benchmark),
               .profile = share(budgets.profile)};
  FeedbackPayload out;
  for (std::size_t k = 0; k < used.size(); ++k) {
    o.kernel_source = used[k]->kernel_source;
    FeedbackPayload p = build_feedback(*used[k]->report, o);
    if (k == 0 || p.verdict == "pass") out.verdict = out.verdict == "pass" ? "pass" : p.verdict;
    for (auto& s : p.sections) {
      s.name = fmt::format("candidate {} of {}: {}", k + 1, used.size(), s.name);
      out.sections.push_back(std::move(s));
    }
  }
  return out;
}

} // namespace kloop::feedback
