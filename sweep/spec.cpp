// Sweep file parsing and planning (sweep/spec.h).
#include "sweep/spec.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <sstream>

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "store/hash.h"

namespace kloop::sweep {

using nlohmann::json;

namespace {

// TOML -> JSON with the same shapes (tables are objects; dates become strings).
json from_toml(const toml::node& n) {
  if (const auto* t = n.as_table()) {
    json o = json::object();
    for (const auto& [k, v] : *t)
      o[std::string(k.str())] = from_toml(v);
    return o;
  }
  if (const auto* a = n.as_array()) {
    json arr = json::array();
    for (const auto& v : *a)
      arr.push_back(from_toml(v));
    return arr;
  }
  if (const auto* s = n.as_string()) return s->get();
  if (const auto* i = n.as_integer()) return i->get();
  if (const auto* f = n.as_floating_point()) return f->get();
  if (const auto* b = n.as_boolean()) return b->get();
  std::ostringstream os;
  n.visit([&os](const auto& v) { os << v; }); // dates and times, as TOML writes them
  return os.str();
}

// Reads fields of one JSON object, naming each by its path in errors, and refusing unknown keys.
class Fields {
public:
  Fields(const json& j, std::string path, std::string where)
      : j_(j), path_(std::move(path)), where_(std::move(where)) {
    if (!j_.is_object()) fail(path_.empty() ? "the file" : path_, "must be an object");
  }
  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw SpecError(fmt::format("sweep file {}: `{}` {}", where_, field, what));
  }
  std::string at(const char* key) const { return path_.empty() ? key : path_ + "." + key; }
  bool has(const char* key) {
    seen_.insert(key);
    return j_.contains(key) && !j_[key].is_null();
  }
  const json& raw(const char* key) {
    seen_.insert(key);
    return j_.at(key);
  }
  std::string str(const char* key, const std::string& dflt, bool required = false) {
    if (!has(key)) {
      if (required) fail(at(key), "is required");
      return dflt;
    }
    if (!j_[key].is_string()) fail(at(key), "must be a string");
    return j_[key].get<std::string>();
  }
  double number(const char* key, double dflt, double lo, double hi) {
    if (!has(key)) return dflt;
    if (!j_[key].is_number()) fail(at(key), "must be a number");
    const double v = j_[key].get<double>();
    if (!std::isfinite(v) || v < lo || v > hi)
      fail(at(key), fmt::format("must be from {} to {} (got {})", lo, hi, v));
    return v;
  }
  std::int64_t integer(const char* key, std::int64_t dflt, std::int64_t lo, std::int64_t hi) {
    if (!has(key)) return dflt;
    if (!j_[key].is_number_integer()) fail(at(key), "must be an integer");
    const auto v = j_[key].get<std::int64_t>();
    if (v < lo || v > hi) fail(at(key), fmt::format("must be from {} to {} (got {})", lo, hi, v));
    return v;
  }
  bool boolean(const char* key, bool dflt) {
    if (!has(key)) return dflt;
    if (!j_[key].is_boolean()) fail(at(key), "must be true or false");
    return j_[key].get<bool>();
  }
  void no_unknown_keys() const {
    for (auto it = j_.begin(); it != j_.end(); ++it)
      if (!seen_.count(it.key()))
        fail(at(it.key().c_str()), "is not a sweep-file key (check the spelling; README "
                                   "\"Sweeps\" lists them)");
  }

private:
  const json& j_;
  std::string path_, where_;
  std::set<std::string> seen_;
};

bool plain_name(const std::string& s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-';
  });
}

Generator parse_generator(const json& j, const std::string& path, const std::string& where) {
  Fields f(j, path, where);
  Generator g;
  g.provider = f.str("provider", "", true);
  if (g.provider != "offline" && g.provider != "openai" && g.provider != "anthropic")
    f.fail(f.at("provider"), "must be offline, openai or anthropic (replay re-drives one stored "
                             "session; it is not a generator to sweep)");
  g.model = f.str("model", "");
  g.base_url = f.str("base_url", "");
  g.api_key_env = f.str("api_key_env", "");
  g.name = f.str("name", g.model.empty() ? g.provider : g.provider + "-" + g.model);
  if (!plain_name(g.name))
    f.fail(f.at("name"), fmt::format("must be 1-64 of A-Z a-z 0-9 . _ - (got '{}'); it names "
                                     "task folders",
                                     g.name));
  g.prompt_variant = f.str("prompt_variant", "default");
  if (g.prompt_variant != "default")
    f.fail(f.at("prompt_variant"), fmt::format("is '{}', but kloop has one prompt variant, "
                                               "'default' (prompts/templates); leave it out",
                                               g.prompt_variant));
  if (g.provider == "offline" &&
      (!g.model.empty() || !g.base_url.empty() || !g.api_key_env.empty()))
    f.fail(path, "is an offline generator: it takes no model, base_url or api_key_env");
  if (!g.api_key_env.empty() && !plain_name(g.api_key_env))
    f.fail(f.at("api_key_env"), "must be an environment variable's name (never the key itself)");
  if (f.has("price_usd_per_mtok")) {
    Fields p(f.raw("price_usd_per_mtok"), f.at("price_usd_per_mtok"), where);
    g.usd_per_mtok_input = p.number("input", 0, 0, 1e6);
    g.usd_per_mtok_output = p.number("output", 0, 0, 1e6);
    p.no_unknown_keys();
  }
  f.no_unknown_keys();
  return g;
}

void parse_slurm(Fields& top, Spec& s, const std::string& where) {
  if (!top.has("slurm")) return;
  Fields f(top.raw("slurm"), "slurm", where);
  s.slurm.max_parallel = static_cast<int>(f.integer("max_parallel", 4, 1, 100000));
  s.slurm.gres = f.str("gres", "gpu:1");
  s.slurm.time_limit = f.str("time_limit", "02:00:00");
  if (s.slurm.time_limit.empty() ||
      s.slurm.time_limit.find_first_not_of("0123456789:-") != std::string::npos)
    f.fail("slurm.time_limit", "must be a Slurm time such as 90, 01:30:00 or 1-00:00:00");
  s.slurm.partition = f.str("partition", "");
  s.slurm.mem = f.str("mem", "");
  s.slurm.cpus_per_task = static_cast<int>(f.integer("cpus_per_task", 0, 0, 4096));
  if (f.has("sbatch_args")) {
    const json& a = f.raw("sbatch_args");
    if (!a.is_array()) f.fail("slurm.sbatch_args", "must be an array of strings");
    for (const auto& v : a) {
      if (!v.is_string() || v.get<std::string>().rfind("--", 0) != 0 ||
          v.get<std::string>().find('\n') != std::string::npos)
        f.fail("slurm.sbatch_args", "must hold sbatch options such as \"--qos=normal\"");
      s.slurm.sbatch_args.push_back(v.get<std::string>());
    }
  }
  f.no_unknown_keys();
}

} // namespace

std::vector<std::string> registered_operators() {
  return {"rmsnorm"};
}

json Generator::to_json() const {
  json j = {{"name", name}, {"provider", provider}, {"prompt_variant", prompt_variant}};
  if (!model.empty()) j["model"] = model;
  if (!base_url.empty()) j["base_url"] = base_url;
  if (!api_key_env.empty()) j["api_key_env"] = api_key_env;
  if (usd_per_mtok_input)
    j["price_usd_per_mtok"] = {{"input", *usd_per_mtok_input},
                               {"output", usd_per_mtok_output.value_or(0)}};
  return j;
}

json Spec::to_json() const {
  json gens = json::array();
  for (const auto& g : generators)
    gens.push_back(g.to_json());
  return {{"name", name},
          {"operators", operators},
          {"generators", gens},
          {"seeds", seeds},
          {"budget", budget},
          {"options",
           {{"max_tokens", max_tokens},
            {"max_cost_usd", max_cost_usd},
            {"worker_timeout_s", worker_timeout_s},
            {"no_sandbox", no_sandbox}}},
          {"local", {{"cpu_jobs", local_cpu_jobs}}},
          {"slurm",
           {{"max_parallel", slurm.max_parallel},
            {"gres", slurm.gres},
            {"time_limit", slurm.time_limit},
            {"partition", slurm.partition},
            {"mem", slurm.mem},
            {"cpus_per_task", slurm.cpus_per_task},
            {"sbatch_args", slurm.sbatch_args}}}};
}

Spec spec_from_json(const json& j, const std::string& where) {
  Fields f(j, "", where);
  Spec s;
  s.name = f.str("name", "", true);
  if (!plain_name(s.name)) f.fail("name", "must be 1-64 of A-Z a-z 0-9 . _ -");
  const auto known = registered_operators();
  if (!f.has("operators")) f.fail("operators", "is required (a list of operators, or \"all\")");
  const json& ops = f.raw("operators");
  if (ops == "all") {
    s.operators = known;
  } else {
    if (!ops.is_array() || ops.empty())
      f.fail("operators", "must be a non-empty list of operators, or \"all\"");
    for (const auto& o : ops) {
      if (!o.is_string() ||
          std::find(known.begin(), known.end(), o.get<std::string>()) == known.end())
        f.fail("operators", fmt::format("names {}, which is not an operator kloop knows ({})",
                                        o.dump(), fmt::format("{}", fmt::join(known, ", "))));
      if (std::find(s.operators.begin(), s.operators.end(), o.get<std::string>()) ==
          s.operators.end())
        s.operators.push_back(o.get<std::string>());
    }
  }
  if (!f.has("generators") || !f.raw("generators").is_array() || f.raw("generators").empty())
    f.fail("generators", "must be a non-empty list of generators");
  std::set<std::string> names;
  for (std::size_t i = 0; i < f.raw("generators").size(); ++i) {
    Generator g = parse_generator(f.raw("generators")[i], fmt::format("generators[{}]", i), where);
    if (!names.insert(g.name).second)
      f.fail(fmt::format("generators[{}].name", i),
             fmt::format("'{}' names two generators; give each a unique name", g.name));
    s.generators.push_back(std::move(g));
  }
  if (!f.has("seeds")) f.fail("seeds", "is required (a list of seeds, or a count N for 1..N)");
  const json& seeds = f.raw("seeds");
  if (seeds.is_number_integer() && seeds.get<std::int64_t>() >= 1 &&
      seeds.get<std::int64_t>() <= 10000) {
    for (std::int64_t k = 1; k <= seeds.get<std::int64_t>(); ++k)
      s.seeds.push_back(k);
  } else if (seeds.is_array() && !seeds.empty()) {
    for (const auto& v : seeds) {
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0)
        f.fail("seeds", fmt::format("holds {}; a seed is an integer >= 0", v.dump()));
      if (std::find(s.seeds.begin(), s.seeds.end(), v.get<std::int64_t>()) == s.seeds.end())
        s.seeds.push_back(v.get<std::int64_t>());
    }
  } else {
    f.fail("seeds", "must be a non-empty list of integers >= 0, or a count from 1 to 10000");
  }
  s.budget = static_cast<int>(f.integer("budget", 5, 1, 100));
  if (f.has("options")) {
    Fields o(f.raw("options"), "options", where);
    s.max_tokens = o.integer("max_tokens", 0, 0, INT64_MAX);
    s.max_cost_usd = o.number("max_cost_usd", 0, 0, 1e9);
    s.worker_timeout_s = o.number("worker_timeout_s", 120, 1, 3600);
    s.no_sandbox = o.boolean("no_sandbox", false);
    o.no_unknown_keys();
  }
  if (f.has("local")) {
    Fields l(f.raw("local"), "local", where);
    s.local_cpu_jobs = static_cast<int>(l.integer("cpu_jobs", 1, 1, 256));
    l.no_unknown_keys();
  }
  parse_slurm(f, s, where);
  f.no_unknown_keys();
  return s;
}

Spec parse_spec(const std::string& text, const std::string& path) {
  json j;
  const bool toml_file = path.size() >= 5 && path.substr(path.size() - 5) == ".toml";
  if (toml_file) {
    try {
      j = from_toml(toml::parse(text, path));
    } catch (const toml::parse_error& e) {
      throw SpecError(fmt::format("sweep file {}:{}:{}: not valid TOML: {}", path,
                                  e.source().begin.line, e.source().begin.column,
                                  std::string(e.description())));
    }
  } else {
    j = json::parse(text, nullptr, false);
    if (j.is_discarded())
      throw SpecError(
          fmt::format("sweep file {}: not valid JSON (name a .toml file for TOML)", path));
  }
  return spec_from_json(j, path);
}

json Task::to_json() const {
  return {{"index", index},
          {"id", id},
          {"operator", op},
          {"generator", generator.to_json()},
          {"seed", seed}};
}

std::vector<Task> plan(const Spec& spec) {
  std::vector<Task> tasks;
  const json options = spec.to_json()["options"];
  for (const auto& op : spec.operators)
    for (const auto& g : spec.generators)
      for (std::int64_t seed : spec.seeds) {
        Task t;
        t.index = static_cast<int>(tasks.size());
        t.op = op;
        t.generator = g;
        t.seed = seed;
        // What the task runs; the key's variable and the price are not part of it.
        const json what = {{"operator", op},
                           {"provider", g.provider},
                           {"model", g.model},
                           {"base_url", g.base_url},
                           {"prompt_variant", g.prompt_variant},
                           {"seed", seed},
                           {"budget", spec.budget},
                           {"options", options}};
        t.id = fmt::format("{}.{}.s{}-{}", op, g.name, seed,
                           store::sha256_hex(what.dump()).substr(0, 8));
        tasks.push_back(std::move(t));
      }
  return tasks;
}

} // namespace kloop::sweep
