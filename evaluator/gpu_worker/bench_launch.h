// Device buffers and launchers of the worker's measurement modes (benchmark, sanitize, pcsample,
// bench; h7-api.md) for a call of any operator given as a shape (op::BenchShape: rows, axes,
// dtype): every declared tensor in its own buffer of exactly the elements the call spans, the
// batched tensors [rows, row] at a row stride, the broadcast tensors contiguous. Inputs get
// deterministic values (fill_uniform): batched inputs uniform in [-2, 2), broadcast inputs in
// [0.5, 1.5) (weight-like); outputs are left unwritten. Calls launch through CallLauncher
// (launch.h), the one launch path of the worker.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "evaluator/gpu_worker/cuda_rt.h"
#include "evaluator/gpu_worker/launch.h"
#include "kernels/operator.h"

namespace kloop::gpu {

// One shape of an operator as the measurement modes call it: its validated metadata, its
// geometry without addresses (row_strides[t] elements for batched tensor t; 0: contiguous) and
// the bytes each declared tensor spans.
struct ShapePlan {
  const op::Operator* op = nullptr;
  op::BenchShape shape;
  ShapeCall call;
  op::CallGeometry geom;
  std::vector<std::size_t> bytes;   // per declared tensor
  std::vector<int> inputs, outputs; // declaration indices by role (input, output)
  // Launcher of `cand` (null: the reference) at `addresses`, with the metadata for wrapper_call.
  std::unique_ptr<CallLauncher> launcher(const LoadedCandidate* cand, const op::DeviceInfo& device,
                                         const std::vector<std::uintptr_t>& addresses) const;
  // Bytes one call reads and writes of its batched tensors (the data that rotates in L2).
  std::size_t batched_traffic() const;
};
// Throws std::runtime_error when the operator rejects the shape.
ShapePlan plan_shape(const op::Operator& op, const op::BenchShape& shape,
                     const std::vector<std::int64_t>& row_strides = {});

// Reads a shape of the measurement requests: op::BenchShape's JSON ({"rows", "dtype", one key per
// variable axis}), with optional "<tensor>_row_stride" keys (elements) for batched tensors.
// Throws std::invalid_argument naming a missing key.
op::BenchShape read_shape(const op::Declaration& decl, const nlohmann::json& j,
                          std::vector<std::int64_t>* row_strides = nullptr);

// Fills input `t` (a declaration index) of `plan` at `p` deterministically from `seed`.
cudaError_t fill_input(const ShapePlan& plan, int t, void* p, std::uint64_t seed,
                       cudaStream_t stream);

// One buffer per declared tensor of a plan, inputs filled from `seed` (input k of the
// declaration's inputs: seed + k for batched, seed + 999 - k for broadcast ones).
struct ShapeBuffers {
  std::vector<DeviceBuffer> tensors;
  ShapeBuffers(const ShapePlan& plan, std::uint64_t seed, cudaStream_t stream);
  std::vector<std::uintptr_t> addresses() const;
};

} // namespace kloop::gpu
