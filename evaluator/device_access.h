// Access to one GPU shared by several candidates' device gates (issue 26): the scheduler gives
// every device one DeviceLock, and every process that runs on the device (a GPU worker batch, a
// compute-sanitizer or ncu run) holds it for its lifetime. Two kinds of work: timed work (the
// benchmark batch, CUPTI stall sampling, ncu) runs alone on the device, because another context
// time-slicing the GPU would change what it measures; shared work (correctness batches and the
// sanitizer tools, whose results do not depend on timing) may run beside other shared work, up to
// a bound per device. Timed work waits for the shared work in flight to finish and blocks new
// shared work while it waits (writer preference), so a stream of correctness batches cannot starve
// a benchmark. Without a DeviceAccess (nullptr) a process runs at once, as before the scheduler.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string_view>

namespace kloop::evaluator {

enum class DeviceWork { kShared, kTimed };
std::string_view device_work_name(DeviceWork work); // "shared", "timed"

// The boundary the device gates see; the real one is DeviceLock, tests use fakes that record.
class DeviceAccess {
public:
  virtual ~DeviceAccess() = default;
  // Blocks until `work` may start on the device. Every acquire() is followed by one release() of
  // the same kind (DeviceHold does both).
  virtual void acquire(DeviceWork work) = 0;
  virtual void release(DeviceWork work) = 0;
};

// Holds `access` (may be null: no hold) for `work` from construction to destruction; wait_ms()
// is how long the construction waited for the device.
class DeviceHold {
public:
  DeviceHold(DeviceAccess* access, DeviceWork work);
  ~DeviceHold();
  DeviceHold(const DeviceHold&) = delete;
  DeviceHold& operator=(const DeviceHold&) = delete;
  double wait_ms() const { return wait_ms_; }

private:
  DeviceAccess* access_;
  DeviceWork work_;
  double wait_ms_ = 0;
};

// Readers-writer lock with writer preference: at most `max_shared` shared holders at once (>= 1),
// a timed holder alone. Thread-safe.
class DeviceLock final : public DeviceAccess {
public:
  explicit DeviceLock(int max_shared = 2) : max_shared_(max_shared < 1 ? 1 : max_shared) {}
  void acquire(DeviceWork work) override;
  void release(DeviceWork work) override;
  int max_shared() const { return max_shared_; }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  const int max_shared_;
  int shared_ = 0;        // shared holders now
  bool timed_ = false;    // a timed holder now
  int timed_waiting_ = 0; // timed work waiting (blocks new shared work)
};

} // namespace kloop::evaluator
