// GPU telemetry through NVML, loaded at run time with dlopen("libnvidia-ml.so.1") and never linked
// (the worker must start where there is no driver; ARCHITECTURE.md). One reading per batch of
// benchmark samples: SM and memory clocks, temperature, power and the clock-event (throttle)
// reasons. A batch whose reasons include a slowdown (power cap, thermal, hardware slowdown, power
// brake) is marked throttled. Without NVML every reading says unavailable and why.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace kloop::gpu {

struct TelemetryReading {
  bool available = false;
  unsigned sm_clock_mhz = 0, mem_clock_mhz = 0, temperature_c = 0;
  double power_w = 0;
  std::uint64_t throttle_reasons = 0; // nvmlClocksEventReason* bit mask
  bool throttled = false;             // a slowdown bit is set (kThrottleMask)
  nlohmann::json to_json() const;
};

// Slowdown bits of nvmlDeviceGetCurrentClocksEventReasons (nvml.h): SW power cap 0x4, HW slowdown
// 0x8, sync boost 0x10 excluded, SW thermal 0x20, HW thermal 0x40, HW power brake 0x80.
inline constexpr std::uint64_t kThrottleMask = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

class Telemetry {
public:
  // Loads NVML and opens the device with `pci_bus_id` (cudaDeviceGetPCIBusId); never throws.
  explicit Telemetry(const std::string& pci_bus_id);
  ~Telemetry();
  Telemetry(const Telemetry&) = delete;
  Telemetry& operator=(const Telemetry&) = delete;
  bool available() const;
  const std::string& reason() const { return reason_; } // why unavailable
  TelemetryReading read() const;
  nlohmann::json to_json() const; // {"available", "reason", "source": "nvml"}

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string reason_;
};

} // namespace kloop::gpu
