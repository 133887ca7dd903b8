// Shared and timed access to one device (device_access.h).
#include "evaluator/device_access.h"

namespace kloop::evaluator {

std::string_view device_work_name(DeviceWork work) {
  return work == DeviceWork::kTimed ? "timed" : "shared";
}

DeviceHold::DeviceHold(DeviceAccess* access, DeviceWork work) : access_(access), work_(work) {
  if (access_ == nullptr) return;
  const auto t0 = std::chrono::steady_clock::now();
  access_->acquire(work_);
  wait_ms_ =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

DeviceHold::~DeviceHold() {
  if (access_ != nullptr) access_->release(work_);
}

void DeviceLock::acquire(DeviceWork work) {
  std::unique_lock<std::mutex> lock(mu_);
  if (work == DeviceWork::kTimed) {
    ++timed_waiting_;
    cv_.wait(lock, [&] { return !timed_ && shared_ == 0; });
    --timed_waiting_;
    timed_ = true;
    return;
  }
  cv_.wait(lock, [&] { return !timed_ && timed_waiting_ == 0 && shared_ < max_shared_; });
  ++shared_;
}

void DeviceLock::release(DeviceWork work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (work == DeviceWork::kTimed)
      timed_ = false;
    else if (shared_ > 0)
      --shared_;
  }
  cv_.notify_all();
}

} // namespace kloop::evaluator
