// The multi-device scheduler (scheduler.h).
#include "agent/scheduler.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

namespace kloop::agent {

using evaluator::Evaluation;
using evaluator::HostStages;
using evaluator::Phase;
using evaluator::steady_now_ms;

struct Scheduler::Device {
  std::unique_ptr<DeviceWorker> worker;
  evaluator::DeviceLock lock;
  Device(std::unique_ptr<DeviceWorker> w, int shared) : worker(std::move(w)), lock(shared) {}
};

std::unique_ptr<evaluator::DeviceGates> GpuDeviceWorker::gates(evaluator::DeviceAccess& access,
                                                               bool profile) {
  evaluator::GpuGatesOptions o = options_;
  o.runner.device = device_;
  o.runner.access = &access;
  if (!profile && o.pc_sampling) {
    o.pc_sampling = false;
    o.profile_skip_reason = "not sampled: this candidate's report feeds no further prompt (the "
                            "last iteration; KLOOP_THROUGHPUT=profile_on_demand=0 samples every "
                            "passing candidate)";
  }
  return std::make_unique<evaluator::GpuWorkerGates>(std::move(o));
}

SchedulerOptions scheduler_options(const evaluator::ThroughputOptions& t) {
  SchedulerOptions o;
  o.profile_on_demand = t.profile_on_demand;
  if (!t.pipeline) return o; // one candidate at a time through every stage
  o.pipeline = true;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  o.host_jobs = t.host_jobs > 0 ? t.host_jobs : static_cast<int>(std::clamp(cores / 2, 1u, 8u));
  o.device_candidates = std::max(1, t.device_candidates);
  o.shared_per_device = std::max(1, t.shared_per_device);
  return o;
}

Scheduler::Scheduler(std::vector<std::unique_ptr<DeviceWorker>> devices, SchedulerOptions options)
    : options_(std::move(options)) {
  for (auto& w : devices)
    devices_.push_back(std::make_unique<Device>(std::move(w), options_.shared_per_device));
}

Scheduler::~Scheduler() = default;

Evaluation Scheduler::evaluate(const evaluator::Candidate& candidate) {
  auto out = evaluate_batch({candidate}, nullptr);
  return std::move(*out.front());
}

namespace {

// A wait worth recording (scheduling noise below a millisecond is not).
void add_wait(Evaluation& ev, const char* name, double from_ms, double to_ms, nlohmann::json detail,
              const std::string& device = "") {
  if (to_ms - from_ms < 1.0) return;
  ev.phases.push_back(
      Phase{name, from_ms - ev.origin_ms, to_ms - from_ms, device, false, std::move(detail)});
}

} // namespace

std::optional<Evaluation> Scheduler::settle_on_host(HostStages& h,
                                                    const evaluator::Candidate& c) const {
  if (!h.device_ready) return std::move(h.evaluation);
  if (!devices_.empty()) return std::nullopt;
  evaluator::NoDeviceGates none(options_.no_device_reason);
  return evaluator::run_device_stages(std::move(h), c, none);
}

std::vector<std::optional<Evaluation>>
Scheduler::evaluate_batch(const std::vector<evaluator::Candidate>& candidates,
                          const std::atomic<bool>* cancel) {
  const std::size_t n = candidates.size();
  std::vector<std::optional<Evaluation>> out(n);
  if (n == 0) return out;
  const double origin = steady_now_ms();
  const auto cancelled = [cancel] { return cancel != nullptr && cancel->load(); };
  const bool profile = profile_.load();
  const auto host_stages = [this](const evaluator::Candidate& c, double at) {
    return options_.host_stages ? options_.host_stages(c, at)
                                : evaluator::run_host_stages(c, options_.evaluate, at);
  };
  if (!options_.pipeline) { // one at a time, every stage, on the first device
    for (std::size_t i = 0; i < n && !cancelled(); ++i) {
      HostStages h = host_stages(candidates[i], steady_now_ms());
      if (auto settled = settle_on_host(h, candidates[i])) {
        out[i] = std::move(settled);
      } else {
        Device& dev = *devices_.front();
        auto gates = dev.worker->gates(dev.lock, profile);
        out[i] = evaluator::run_device_stages(std::move(h), candidates[i], *gates);
      }
    }
    return out;
  }

  struct Ready {
    HostStages host;
    double since_ms; // when its host stages ended
  };
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::size_t, Ready> ready; // device-ready candidates, lowest index first
  std::size_t host_finished = 0;      // candidates done with (or skipped) their host stages
  std::size_t next_host = 0;
  std::exception_ptr failure;

  const auto host_loop = [&] {
    for (;;) {
      std::size_t i = 0;
      {
        std::lock_guard<std::mutex> lock(mu);
        if (next_host >= n) return;
        i = next_host++;
      }
      std::optional<Ready> for_device;
      try {
        if (!cancelled()) {
          const double started = steady_now_ms();
          HostStages h = host_stages(candidates[i], origin);
          add_wait(h.evaluation, "host_wait", origin, started, nlohmann::json::object());
          if (auto settled = settle_on_host(h, candidates[i]))
            out[i] = std::move(settled);
          else
            for_device = Ready{std::move(h), steady_now_ms()};
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failure) failure = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        if (for_device) ready.emplace(i, std::move(*for_device));
        ++host_finished;
      }
      cv.notify_all();
    }
  };

  const auto device_loop = [&](Device& dev) {
    for (;;) {
      std::size_t i = 0;
      std::optional<Ready> job;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return !ready.empty() || host_finished == n; });
        if (ready.empty()) return; // every host stage done, nothing left for a device
        auto first = ready.begin();
        i = first->first;
        job = std::move(first->second);
        ready.erase(first);
      }
      if (cancelled()) continue; // never started: nullopt
      try {
        Evaluation& ev = job->host.evaluation;
        add_wait(ev, "device_wait", job->since_ms, steady_now_ms(), {{"work", "queue"}},
                 dev.worker->device());
        auto gates = dev.worker->gates(dev.lock, profile);
        out[i] = evaluator::run_device_stages(std::move(job->host), candidates[i], *gates);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failure) failure = std::current_exception();
      }
    }
  };

  {
    std::vector<std::jthread> threads;
    const int hosts = static_cast<int>(
        std::min<std::size_t>(static_cast<std::size_t>(std::max(1, options_.host_jobs)), n));
    for (int h = 0; h < hosts; ++h)
      threads.emplace_back(host_loop);
    const int per_device = static_cast<int>(std::min<std::size_t>(
        static_cast<std::size_t>(std::max(1, options_.device_candidates)), n));
    for (auto& d : devices_)
      for (int k = 0; k < per_device; ++k)
        threads.emplace_back(device_loop, std::ref(*d));
  } // joins every thread
  if (failure) std::rethrow_exception(failure);
  return out;
}

} // namespace kloop::agent
