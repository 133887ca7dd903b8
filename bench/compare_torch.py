#!/usr/bin/env python3
"""Compare a kloop candidate with the deployed PyTorch paths of its operator on the GPU machine.

Loads a candidate's cubin and manifest, launches it on torch tensors through the CUDA driver API
of cuda-python (cuda.bindings.driver: cuLibraryLoadData / cuLibraryGetKernel / cuLaunchKernel),
and times it side by side with the operator's torch function (weighted_rmsnorm/1:
torch.nn.functional.rms_norm; row_softmax/1: torch.nn.functional.softmax) and torch.compile of
its reference, compiled per shape point (torch._dynamo.reset(), dynamic=False: a static graph for
that shape) and once more with only the rows dynamic (torch._dynamo.mark_dynamic on dim 0), on
the contract's shape sweep: interleaved A-B-C-C-B-A on identical inputs, L2 flushed
(persisting/evict_last lines reset to normal, then 2x L2 written) before every sample, then a GPU-side delay (torch.cuda._sleep, --blocker-us) so
the host enqueues the timed call while the GPU is still busy: CUDA events then time the kernel,
not Python's launch overhead (the benchmark gate's blocking-kernel idea). Outputs are checked
against the fp32 reference. Prints one table: shape, dtype, each path's median time and TB/s, and ratios.

usage: bench/compare_torch.py CANDIDATE_DIR [--cubin PATH] [--samples 30] [--shapes all|quick]
                              [--points DTYPE:ROWS:WIDTH ...] [--blocker-us 300]
CANDIDATE_DIR holds kernel.cu and manifest.json (its "contract" names the operator); the cubin
defaults to CANDIDATE_DIR/kernel.cubin (build it with: nvcc -cubin -arch=sm_90 -lineinfo -o
kernel.cubin kernel.cu). The header line records the torch.compile modes.
"""
import argparse
import ctypes
import json
import math
import pathlib
import statistics
import sys

import torch
import torch.nn.functional as F
from cuda.bindings import driver as cu

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def rmsnorm_reference(x, weight, eps):
    """The seed's reference: fp32 accumulation, cast back once."""
    xf = x.float()
    scale = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * scale * weight.float()).to(x.dtype)


def softmax_reference(x):
    """row_softmax/1's formula: float32 inside, cast back once (kernels/softmax/contract.cpp)."""
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


class RmsNorm:
    """weighted_rmsnorm/1 (kernels/rmsnorm/contract.cpp): x [rows, h], weight [h], eps."""
    contract = "weighted_rmsnorm/1"
    axis = "h"
    sweep = [(8, 4096), (65536, 4096), (16384, 4096), (4096, 8192), (2048, 16384), (32768, 1009),
             (4096, 4099), (65536, 128)]
    quick = [(65536, 4096), (32768, 1009), (65536, 128), (4096, 4099)]
    torch_name = "F.rms_norm"
    tol = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-3, 1e-2), torch.bfloat16: (1e-2, 2e-2)}
    bytes_note = "(x read + weight read once + y write)"

    def __init__(self, eps):
        self.eps = eps

    def inputs(self, rows, h, dtype, g):
        x = (torch.rand(rows, h, device="cuda", generator=g) * 4 - 2).to(dtype)
        w = (torch.rand(h, device="cuda", generator=g) + 0.5).to(dtype)
        return (x, w)

    def reference(self, x, w):
        return rmsnorm_reference(x, w, self.eps)

    def torch_path(self, x, w):
        return F.rms_norm(x, (x.shape[-1],), w, self.eps)

    def compiled(self, dynamic_rows):
        fn = torch.compile(rmsnorm_reference, dynamic=None if dynamic_rows else False)
        return lambda x, w: fn(x, w, self.eps)

    def kernel_args(self, ins, y):
        x, w = ins
        return ((x.data_ptr(), w.data_ptr(), y.data_ptr(), x.shape[0], x.shape[1], x.stride(0),
                 y.stride(0), float(self.eps)),
                (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong,
                 ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_float))

    def logical_bytes(self, rows, h, element_size):
        return (2 * rows * h + h) * element_size


class Softmax:
    """row_softmax/1 (kernels/softmax/contract.cpp): x [rows, n]; the target shape first."""
    contract = "row_softmax/1"
    axis = "n"
    sweep = [(16384, 32768), (8, 4096), (512, 4096), (65536, 128), (32768, 1024), (32768, 1009),
             (16384, 4096), (4096, 4099), (8192, 8192), (4096, 32768), (1024, 32768)]
    quick = [(16384, 32768), (32768, 1024), (65536, 128), (4096, 4099)]
    torch_name = "F.softmax"
    # The contract's rtol (float32 1e-4, float16 2e-3, bfloat16 1.6e-2) with a small atol.
    tol = {torch.float32: (1e-7, 1e-4), torch.float16: (1.2e-7, 2e-3), torch.bfloat16: (1e-7, 1.6e-2)}
    bytes_note = "(x read + y write)"

    def __init__(self, eps):
        del eps

    def inputs(self, rows, n, dtype, g):
        # Logits of attention scale: N(0, 1) * 4.
        return ((torch.randn(rows, n, device="cuda", generator=g) * 4).to(dtype),)

    def reference(self, x):
        return softmax_reference(x)

    def torch_path(self, x):
        return F.softmax(x, dim=-1)

    def compiled(self, dynamic_rows):
        return torch.compile(softmax_reference, dynamic=None if dynamic_rows else False)

    def kernel_args(self, ins, y):
        (x,) = ins
        return ((x.data_ptr(), y.data_ptr(), x.shape[0], x.shape[1], x.stride(0), y.stride(0)),
                (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int,
                 ctypes.c_longlong, ctypes.c_longlong))

    def logical_bytes(self, rows, n, element_size):
        return 2 * rows * n * element_size


OPERATORS = {op.contract: op for op in (RmsNorm, Softmax)}


def check(result):
    """Raises on a driver error; returns the call's value(s) (cuda-python returns (err, *values))."""
    if not isinstance(result, tuple):
        result = (result,)
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver call failed: {err}")
    return values[0] if len(values) == 1 else (tuple(values) if values else None)


class Candidate:
    """A candidate cubin launched with the trusted wrapper's launch rule (per_rows or persistent)."""

    def __init__(self, cubin: bytes, manifest: dict, op):
        self.manifest = manifest
        self.op = op
        self.lib = check(cu.cuLibraryLoadData(cubin, None, None, 0, None, None, 0))
        self.kernels = {d: check(cu.cuLibraryGetKernel(self.lib, name.encode()))
                        for d, name in manifest["entry_points"].items()}
        dev = check(cu.cuDeviceGet(0))
        self.sms = check(cu.cuDeviceGetAttribute(
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev))

    def supports(self, dtype_name, width, x):
        d = self.manifest["dispatch"]
        a = self.op.axis
        align = d["alignment_bytes"]
        return (dtype_name in self.kernels and d[a + "_min"] <= width <= d[a + "_max"]
                and width % d[a + "_multiple_of"] == 0 and x.data_ptr() % align == 0
                and (width * x.element_size()) % align == 0)

    def prepare(self, ins, dtype_name):
        """The launch for these tensors, resolved once: returns a callable that only enqueues the
        kernel (into a preallocated y) and returns y."""
        x = ins[0]
        rows, width = x.shape
        y = torch.empty_like(x)
        launch = self.manifest["launch"]
        smem = (launch["dynamic_smem"]["fixed_bytes"]
                + launch["dynamic_smem"]["bytes_per_" + self.op.axis] * width)
        kernel = self.kernels[dtype_name]
        func = check(cu.cuKernelGetFunction(kernel))
        if smem > 48 * 1024:
            check(cu.cuFuncSetAttribute(
                func, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, smem))
        blocks = math.ceil(rows / launch["rows_per_block"])
        if launch["grid"] == "persistent":
            per_sm = check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                func, launch["block_threads"], smem))
            blocks = min(blocks, per_sm * self.sms)
        args, types = self.op.kernel_args(ins, y)
        stream = cu.CUstream(torch.cuda.current_stream().cuda_stream)

        def run(*_):
            check(cu.cuLaunchKernel(func, blocks, 1, 1, launch["block_threads"], 1, 1, smem,
                                    stream, (args, types), 0))
            return y

        return run


def time_paths(paths, samples, flush, blocker_cycles):
    """Interleaved A-B-C-C-B-A rounds of the zero-argument callables `paths`, L2 flushed and the
    GPU held busy (blocker_cycles of torch.cuda._sleep) before each call, so the host's launch
    overhead is not timed; median ms per path."""
    times = {name: [] for name in paths}
    names = list(paths)
    order = names + names[::-1]
    start = [torch.cuda.Event(enable_timing=True) for _ in order]
    stop = [torch.cuda.Event(enable_timing=True) for _ in order]
    for _ in range(max(1, samples // 2)):
        for i, name in enumerate(order):
            # Lines a kernel loaded under an L2 evict_last policy (torch.compile's Triton kernels
            # do) survive a plain memset flush; return them to normal priority first (H200 probe,
            # bench/cuda/two_pass.cu).
            torch.cuda.synchronize()
            check(cu.cuCtxResetPersistingL2Cache())
            flush.zero_()
            torch.cuda._sleep(blocker_cycles)
            start[i].record()
            paths[name]()
            stop[i].record()
        torch.cuda.synchronize()
        for i, name in enumerate(order):
            times[name].append(start[i].elapsed_time(stop[i]))
    return {n: statistics.median(t) for n, t in times.items()}


def parse_points(ap, args, op):
    if not args.points:
        return [(d, r, w) for d in DTYPES for r, w in (op.sweep if args.shapes == "all" else op.quick)]
    try:
        points = [(d, int(r), int(w)) for d, r, w in (p.split(":") for p in args.points)]
    except ValueError:
        ap.error("--points: each point is DTYPE:ROWS:WIDTH, e.g. float32:65536:4096")
    bad = [d for d, _, _ in points if d not in DTYPES]
    if bad:
        ap.error(f"--points: unknown dtype {bad[0]!r}; use one of {', '.join(DTYPES)}")
    return points


def compiled_paths(op, ins):
    """torch.compile of the operator's reference for this point only: Dynamo's caches reset, then
    a static graph (dynamic=False) and one with only the rows dynamic (mark_dynamic on dim 0 of a
    copy of x, so the static graph's inputs stay unmarked). Both compiled and warmed here."""
    torch._dynamo.reset()
    static = op.compiled(dynamic_rows=False)
    dyn_ins = (ins[0].clone(),) + tuple(ins[1:])
    torch._dynamo.mark_dynamic(dyn_ins[0], 0)
    dyn = op.compiled(dynamic_rows=True)
    return {"compile": lambda: static(*ins), "compile_dyn": lambda: dyn(*dyn_ins)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("candidate", type=pathlib.Path)
    ap.add_argument("--cubin", type=pathlib.Path)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--shapes", choices=["all", "quick"], default="all")
    ap.add_argument("--points", nargs="+", metavar="DTYPE:ROWS:WIDTH",
                    help="time only these points (e.g. float32:65536:4096) instead of --shapes")
    ap.add_argument("--eps", type=float, default=1e-6, help="weighted_rmsnorm/1's eps")
    ap.add_argument("--with-copy", action="store_true",
                    help="also time torch's device-to-device copy of x (y.copy_(x)): the same "
                         "bytes moved without the computation, a copy ceiling in the same table")
    ap.add_argument("--blocker-us", type=float, default=300,
                    help="GPU-side delay before each timed call, longer than the host's launch "
                         "overhead (default 300 us)")
    args = ap.parse_args()
    manifest = json.loads((args.candidate / "manifest.json").read_text())
    if manifest.get("contract") not in OPERATORS:
        ap.error(f"manifest contract {manifest.get('contract')!r}: use one of {', '.join(OPERATORS)}")
    if "dispatch" not in manifest:
        ap.error("a format-2 manifest (variants): this script times format-1 candidates only")
    op = OPERATORS[manifest["contract"]](args.eps)
    points = parse_points(ap, args, op)
    torch.cuda.init()
    check(cu.cuInit(0))
    cand = Candidate((args.cubin or args.candidate / "kernel.cubin").read_bytes(), manifest, op)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    clock_khz = check(cu.cuDeviceGetAttribute(
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_CLOCK_RATE, check(cu.cuDeviceGet(0))))
    blocker_cycles = int(args.blocker_us * clock_khz / 1e3)
    print(f"# {op.contract} on {torch.cuda.get_device_name(0)}, torch {torch.__version__}, L2 "
          f"{l2 >> 20} MiB, {2 * max(1, args.samples // 2)} samples, L2 flushed, "
          f"{args.blocker_us:g} us blocker, interleaved; torch.compile per point after "
          f"torch._dynamo.reset(): static = dynamic=False, dyn rows = mark_dynamic(x, 0)")
    header = (f"{'dtype':9s} {'rows x ' + op.axis:>13s} | {'candidate':>16s} | "
              f"{op.torch_name:>16s} | {'compile(static)':>16s} | {'compile(dyn rows)':>17s} | "
              f"{'vs ' + op.torch_name[2:]:>11s} {'vs static':>10s} {'vs dyn':>8s}")
    print(header)
    print("-" * len(header))
    failures = 0
    for dtype_name, rows, width in points:
        dtype = DTYPES[dtype_name]
        g = torch.Generator(device="cuda").manual_seed(rows * 131 + width)
        ins = op.inputs(rows, width, dtype, g)
        route = "cand"
        paths = {}
        if cand.supports(dtype_name, width, ins[0]):
            launch = cand.prepare(ins, dtype_name)
            y = launch().clone()
            atol, rtol = op.tol[dtype]
            ref = op.reference(*ins)
            if not torch.allclose(y.float(), ref.float(), atol=atol, rtol=rtol, equal_nan=True):
                failures += 1
                route = "WRONG"
            else:
                paths["candidate"] = launch
        else:
            route = "n/a"
        paths["torch"] = lambda: op.torch_path(*ins)
        paths.update(compiled_paths(op, ins))
        if args.with_copy:
            ycopy = torch.empty_like(ins[0])
            paths["copy"] = lambda: ycopy.copy_(ins[0])
        for p in paths.values():  # warm-up (compiles, loads)
            p()
        t = time_paths(paths, args.samples, flush, blocker_cycles)
        logical = op.logical_bytes(rows, width, ins[0].element_size())
        cell = lambda n: (f"{t[n] * 1e3:8.1f}us {logical / (t[n] * 1e-3) / 1e12:5.2f}"
                          if n in t else f"{route:>16s}")
        ratio = lambda n, w: f"{t[n] / t['candidate']:{w - 1}.3f}x" if "candidate" in t else " " * w
        print(f"{dtype_name:9s} {rows:6d}x{width:<6d} | {cell('candidate'):>16s} | "
              f"{cell('torch'):>16s} | {cell('compile'):>16s} | {cell('compile_dyn'):>17s} | "
              f"{ratio('torch', 11)} {ratio('compile', 10)} {ratio('compile_dyn', 8)}"
              + (f" | copy {cell('copy')}" if "copy" in t else ""))
    print(f"# TB/s = {op.bytes_note} / median time; ratio > 1: candidate faster")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
