// NVML telemetry through dlopen (telemetry.h). The few NVML entry points are declared here with
// their documented C signatures (nvml.h is not part of the toolkit install on the build machine).
#include "evaluator/gpu_worker/telemetry.h"

#include <dlfcn.h>

namespace kloop::gpu {

namespace {

using nvmlReturn = int; // NVML_SUCCESS == 0
using nvmlDevice = void*;
constexpr unsigned kClockSm = 1, kClockMem = 2; // NVML_CLOCK_SM, NVML_CLOCK_MEM
constexpr unsigned kTempGpu = 0;                // NVML_TEMPERATURE_GPU

} // namespace

struct Telemetry::Impl {
  void* lib = nullptr;
  nvmlDevice dev = nullptr;
  nvmlReturn (*shutdown)() = nullptr;
  nvmlReturn (*clock)(nvmlDevice, unsigned, unsigned*) = nullptr;
  nvmlReturn (*temp)(nvmlDevice, unsigned, unsigned*) = nullptr;
  nvmlReturn (*power)(nvmlDevice, unsigned*) = nullptr;
  nvmlReturn (*reasons)(nvmlDevice, unsigned long long*) = nullptr;
};

Telemetry::Telemetry(const std::string& pci_bus_id) : impl_(std::make_unique<Impl>()) {
  impl_->lib = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!impl_->lib) {
    reason_ = "libnvidia-ml.so.1 not loadable (no NVIDIA driver here)";
    return;
  }
  auto sym = [&](const char* name) { return ::dlsym(impl_->lib, name); };
  auto init = reinterpret_cast<nvmlReturn (*)()>(sym("nvmlInit_v2"));
  auto by_pci = reinterpret_cast<nvmlReturn (*)(const char*, nvmlDevice*)>(
      sym("nvmlDeviceGetHandleByPciBusId_v2"));
  impl_->shutdown = reinterpret_cast<nvmlReturn (*)()>(sym("nvmlShutdown"));
  impl_->clock = reinterpret_cast<nvmlReturn (*)(nvmlDevice, unsigned, unsigned*)>(
      sym("nvmlDeviceGetClockInfo"));
  impl_->temp = reinterpret_cast<nvmlReturn (*)(nvmlDevice, unsigned, unsigned*)>(
      sym("nvmlDeviceGetTemperature"));
  impl_->power =
      reinterpret_cast<nvmlReturn (*)(nvmlDevice, unsigned*)>(sym("nvmlDeviceGetPowerUsage"));
  void* r = sym("nvmlDeviceGetCurrentClocksEventReasons");
  if (!r) r = sym("nvmlDeviceGetCurrentClocksThrottleReasons");
  impl_->reasons = reinterpret_cast<nvmlReturn (*)(nvmlDevice, unsigned long long*)>(r);
  if (!init || !by_pci || !impl_->clock || !impl_->temp || !impl_->power || !impl_->reasons) {
    reason_ = "libnvidia-ml.so.1 lacks an expected entry point";
  } else if (init() != 0) {
    reason_ = "nvmlInit_v2 failed";
  } else if (by_pci(pci_bus_id.c_str(), &impl_->dev) != 0) {
    reason_ = "nvmlDeviceGetHandleByPciBusId_v2(" + pci_bus_id + ") failed";
    impl_->shutdown();
  } else {
    return;
  }
  impl_->dev = nullptr;
}

Telemetry::~Telemetry() {
  if (impl_->dev && impl_->shutdown) impl_->shutdown();
  if (impl_->lib) ::dlclose(impl_->lib);
}

bool Telemetry::available() const {
  return impl_->dev != nullptr;
}

TelemetryReading Telemetry::read() const {
  TelemetryReading t;
  if (!available()) return t;
  unsigned mw = 0;
  unsigned long long reasons = 0;
  t.available = impl_->clock(impl_->dev, kClockSm, &t.sm_clock_mhz) == 0 &&
                impl_->clock(impl_->dev, kClockMem, &t.mem_clock_mhz) == 0 &&
                impl_->temp(impl_->dev, kTempGpu, &t.temperature_c) == 0 &&
                impl_->power(impl_->dev, &mw) == 0 && impl_->reasons(impl_->dev, &reasons) == 0;
  t.power_w = mw / 1000.0;
  t.throttle_reasons = reasons;
  t.throttled = (reasons & kThrottleMask) != 0;
  return t;
}

nlohmann::json TelemetryReading::to_json() const {
  return {{"available", available},
          {"sm_clock_mhz", sm_clock_mhz},
          {"mem_clock_mhz", mem_clock_mhz},
          {"temperature_c", temperature_c},
          {"power_w", power_w},
          {"throttle_reasons", throttle_reasons},
          {"throttled", throttled}};
}

nlohmann::json Telemetry::to_json() const {
  return {{"available", available()}, {"reason", reason_}, {"source", "nvml (dlopen)"}};
}

} // namespace kloop::gpu
