// Test double of the GPU worker's correctness batch on the CPU, built from the producer code the
// GPU path uses, so that evidence made here has the layout and the words of evidence made on an
// H200:
// - a "kernel" is a C++ function writing y ([rows, H], x's dtype) from x and weight, as a CUDA
//   kernel does through the trusted wrapper's arguments;
// - the adapter (cpu_device_suite.cpp) mirrors evaluator/gpu_worker/device_candidate.cpp: it
//   validates (a declared error is raised before any launch), copies x and weight into "device"
//   buffers with guard bytes on both sides, poisons y with kPoisonNan, calls the kernel, judges
//   guards, inputs and a repeat call poisoned with kPoisonFinite with the same pure functions
//   (evaluator/output_audit.h), and returns the output as a fresh tensor;
// - cpu_worker_result() runs the cases through the real correctness core (run_suite, stopping at
//   the first failure as the device gates ask) and writes the batch's result.json with
//   correctness_batch_result (what kloop-gpu-worker writes); gate_from_worker_result() turns it
//   into the correctness gate with classify_gpu_run and correctness_gate_from (what kloop reads).
// Not mirrored: the dispatch predicate (every call goes to the kernel) and concurrent streams.
// The kernels are RMSNorm's (x, weight, eps) form, adapted to the operator-generic correctness core
// with tests/kernels/rmsnorm_calls.h.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "evaluator/gate.h"
#include "kernels/rmsnorm/cases.h"
#include "kernels/tensor.h"

namespace kloop::testing {

// y is a [rows, H] contiguous view inside a buffer with guard bytes before and after it.
using CpuKernel =
    std::function<void(const HostTensor& x, const HostTensor& weight, float eps, HostTensor& y)>;

// The correct kernel: the reference's arithmetic (fp32 accumulation, one final cast).
void reference_kernel(const HostTensor& x, const HostTensor& w, float eps, HostTensor& y);

// A kernel with the addressing defect of CASES.md P7: row r read at storage offset offset + r * H,
// right only when rows are packed (the first public case it fails is the sliced P7 view).
void packed_rows_kernel(const HostTensor& x, const HostTensor& w, float eps, HostTensor& y);

// An in-process CPU callable, judged by the correctness core directly (no adapter): what the core
// serves besides the GPU worker. Returns the output tensor.
using CpuCallable =
    std::function<HostTensor(const HostTensor& x, const HostTensor& weight, float eps)>;

// The files a correctness batch leaves: result.json and the last progress.json.
struct WorkerFiles {
  nlohmann::json result, progress;
};
// One correctness batch of `kernel` (through the adapter) or `callable` on `specs`.
WorkerFiles cpu_worker_result(const CpuKernel& kernel, const std::vector<rmsnorm::CaseSpec>& specs);
WorkerFiles cpu_callable_result(const CpuCallable& callable,
                                const std::vector<rmsnorm::CaseSpec>& specs);

// The correctness gate kloop makes of a batch that exited kGpuWorkerOk.
evaluator::GateResult gate_from_worker_result(const WorkerFiles& files);

inline constexpr const char* kNotBuiltHere =
    "not built: this CPU test runs a C++ stand-in of kernel.cu through the CPU emulation of the "
    "GPU worker (tests/agent/cpu_device.h)";

// The public gates of a candidate (kernel.cu `source`, manifest.json `manifest`) in a CPU test: the
// real contract gate; build and static not_run (no NVRTC here, saying so); correctness from the
// batch of `kernel`, the C++ stand-in of the candidate's kernel.cu; then sanitizer, benchmark and
// roofline not_run as GpuWorkerGates reports them (after a failed correctness gate, or for want of
// a device after a pass).
std::vector<evaluator::GateResult> cpu_gates(const std::string& source, const std::string& manifest,
                                             const CpuKernel& kernel,
                                             const std::vector<rmsnorm::CaseSpec>& specs);

} // namespace kloop::testing
