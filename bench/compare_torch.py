#!/usr/bin/env python3
"""Compare a kloop candidate with the deployed RMSNorm paths on the GPU machine.

Loads a candidate's cubin and manifest, launches it on torch tensors through the CUDA driver API
of cuda-python (cuda.bindings.driver: cuLibraryLoadData / cuLibraryGetKernel / cuLaunchKernel),
and times it side by side with torch.nn.functional.rms_norm and torch.compile of the seed's
reference on the contract's shape sweep: interleaved A-B-C-C-B-A on identical inputs, L2 flushed
(persisting/evict_last lines reset to normal, then 2x L2 written) before every sample, then a GPU-side delay (torch.cuda._sleep, --blocker-us) so
the host enqueues the timed call while the GPU is still busy: CUDA events then time the kernel,
not Python's launch overhead (the benchmark gate's blocking-kernel idea). Outputs are checked
against the fp32 reference. Prints one table: shape, dtype, each path's median time and TB/s, and ratios.

usage: bench/compare_torch.py CANDIDATE_DIR [--cubin PATH] [--samples 30] [--shapes all|quick]
                              [--points DTYPE:ROWS:H ...] [--blocker-us 300]
CANDIDATE_DIR holds kernel.cu and manifest.json; the cubin defaults to CANDIDATE_DIR/kernel.cubin
(build it with: nvcc -cubin -arch=sm_90 -lineinfo -o kernel.cubin kernel.cu).
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

# The contract's sweep (kernels/rmsnorm/contract.cpp: benchmark_shapes).
SWEEP = [(8, 4096), (65536, 4096), (16384, 4096), (4096, 8192), (2048, 16384), (32768, 1009),
         (4096, 4099), (65536, 128)]
QUICK = [(65536, 4096), (32768, 1009), (65536, 128), (4096, 4099)]
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-3, 1e-2), torch.bfloat16: (1e-2, 2e-2)}


def check(result):
    """Raises on a driver error; returns the call's value(s) (cuda-python returns (err, *values))."""
    if not isinstance(result, tuple):
        result = (result,)
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA driver call failed: {err}")
    return values[0] if len(values) == 1 else (tuple(values) if values else None)


def seed_reference(x, weight, eps):
    """The seed's reference: fp32 accumulation, cast back once."""
    xf = x.float()
    scale = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (xf * scale * weight.float()).to(x.dtype)


class Candidate:
    """A candidate cubin launched with the trusted wrapper's launch rule (per_rows or persistent)."""

    def __init__(self, cubin: bytes, manifest: dict):
        self.manifest = manifest
        self.lib = check(cu.cuLibraryLoadData(cubin, None, None, 0, None, None, 0))
        self.kernels = {d: check(cu.cuLibraryGetKernel(self.lib, name.encode()))
                        for d, name in manifest["entry_points"].items()}
        dev = check(cu.cuDeviceGet(0))
        self.sms = check(cu.cuDeviceGetAttribute(
            cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev))

    def supports(self, dtype_name, h, x):
        d = self.manifest["dispatch"]
        align = d["alignment_bytes"]
        return (dtype_name in self.kernels and d["h_min"] <= h <= d["h_max"]
                and h % d["h_multiple_of"] == 0 and x.data_ptr() % align == 0
                and (h * x.element_size()) % align == 0)

    def prepare(self, x, weight, eps, dtype_name):
        """The launch for these tensors, resolved once: returns a callable that only enqueues the
        kernel (into a preallocated y) and returns y."""
        rows, h = x.shape
        y = torch.empty_like(x)
        launch = self.manifest["launch"]
        smem = launch["dynamic_smem"]["fixed_bytes"] + launch["dynamic_smem"]["bytes_per_h"] * h
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
        args = (x.data_ptr(), weight.data_ptr(), y.data_ptr(), rows, h, x.stride(0), y.stride(0),
                float(eps))
        types = (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong, ctypes.c_int,
                 ctypes.c_longlong, ctypes.c_longlong, ctypes.c_float)
        stream = cu.CUstream(torch.cuda.current_stream().cuda_stream)

        def run(*_):
            check(cu.cuLaunchKernel(func, blocks, 1, 1, launch["block_threads"], 1, 1, smem,
                                    stream, (args, types), 0))
            return y

        return run


def time_paths(paths, inputs, samples, flush, blocker_cycles):
    """Interleaved A-B-C-C-B-A rounds, L2 flushed and the GPU held busy (blocker_cycles of
    torch.cuda._sleep) before each call, so the host's launch overhead is not timed; median ms
    per path."""
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
            paths[name](*inputs)
            stop[i].record()
        torch.cuda.synchronize()
        for i, name in enumerate(order):
            times[name].append(start[i].elapsed_time(stop[i]))
    return {n: statistics.median(t) for n, t in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("candidate", type=pathlib.Path)
    ap.add_argument("--cubin", type=pathlib.Path)
    ap.add_argument("--samples", type=int, default=30)
    ap.add_argument("--shapes", choices=["all", "quick"], default="all")
    ap.add_argument("--points", nargs="+", metavar="DTYPE:ROWS:H",
                    help="time only these points (e.g. float32:65536:4096) instead of --shapes")
    ap.add_argument("--eps", type=float, default=1e-6)
    ap.add_argument("--with-copy", action="store_true",
                    help="also time torch's device-to-device copy of x (y.copy_(x)): the same "
                         "bytes moved without the reduction, a copy ceiling in the same table")
    ap.add_argument("--blocker-us", type=float, default=300,
                    help="GPU-side delay before each timed call, longer than the host's launch "
                         "overhead (default 300 us)")
    args = ap.parse_args()
    torch.cuda.init()
    check(cu.cuInit(0))
    manifest = json.loads((args.candidate / "manifest.json").read_text())
    cand = Candidate((args.cubin or args.candidate / "kernel.cubin").read_bytes(), manifest)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    # torch.compile's strongest honest configuration for fixed shapes: a static graph per shape
    # point (dynamic=False; Dynamo's cache raised so no point falls back to eager), compiled and
    # warmed before timing. One default torch.compile shared by every point (what this script did
    # until 2026-12-02) turns shapes dynamic after the first recompile: a weaker baseline.
    for limit in ("recompile_limit", "cache_size_limit"):  # the name changed across versions
        if hasattr(torch._dynamo.config, limit):
            setattr(torch._dynamo.config, limit, max(getattr(torch._dynamo.config, limit), 256))
    clock_khz = check(cu.cuDeviceGetAttribute(
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_CLOCK_RATE, check(cu.cuDeviceGet(0))))
    blocker_cycles = int(args.blocker_us * clock_khz / 1e3)
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, L2 {l2 >> 20} MiB, "
          f"{2 * max(1, args.samples // 2)} samples, L2 flushed, {args.blocker_us:g} us blocker, "
          f"interleaved")
    header = (f"{'dtype':9s} {'rows x h':>13s} | {'candidate':>16s} | {'F.rms_norm':>16s} | "
              f"{'compile(static)':>16s} | {'vs rms_norm':>11s} {'vs compile':>10s}")
    print(header)
    print("-" * len(header))
    failures = 0
    if args.points:
        try:
            points = [(d, int(r), int(h)) for d, r, h in (p.split(":") for p in args.points)]
        except ValueError:
            ap.error("--points: each point is DTYPE:ROWS:H, e.g. float32:65536:4096")
        bad = [d for d, _, _ in points if d not in DTYPES]
        if bad:
            ap.error(f"--points: unknown dtype {bad[0]!r}; use one of {', '.join(DTYPES)}")
    else:
        points = [(d, r, h) for d in DTYPES for r, h in (SWEEP if args.shapes == "all" else QUICK)]
    for dtype_name, rows, h in points:
        dtype = DTYPES[dtype_name]
        g = torch.Generator(device="cuda").manual_seed(rows * 131 + h)
        x = (torch.rand(rows, h, device="cuda", generator=g) * 4 - 2).to(dtype)
        w = (torch.rand(h, device="cuda", generator=g) + 0.5).to(dtype)
        ref = seed_reference(x, w, args.eps)
        route = "cand"
        if cand.supports(dtype_name, h, x):
            launch = cand.prepare(x, w, args.eps, dtype_name)
            y = launch().clone()
            atol, rtol = TOL[dtype]
            if not torch.allclose(y.float(), ref.float(), atol=atol, rtol=rtol):
                failures += 1
                route = "WRONG"
        else:
            route = "n/a"
        compiled = torch.compile(seed_reference, dynamic=False)  # static, this point's shape
        paths = {"F.rms_norm": lambda a, b: F.rms_norm(a, (h,), b, args.eps),
                 "compile": lambda a, b: compiled(a, b, args.eps)}
        if route == "cand":
            paths = {"candidate": launch, **paths}
        if args.with_copy:
            ycopy = torch.empty_like(x)
            paths["copy"] = lambda a, b: ycopy.copy_(a)
        for p in paths.values():  # warm-up (compiles, loads)
            p(x, w)
        t = time_paths(paths, (x, w), args.samples, flush, blocker_cycles)
        logical = (2 * rows * h + h) * x.element_size()
        cell = lambda n: (f"{t[n] * 1e3:8.1f}us {logical / (t[n] * 1e-3) / 1e12:5.2f}"
                          if n in t else f"{route:>16s}")
        ratio = lambda n: f"{t[n] / t['candidate']:10.3f}x" if "candidate" in t else " " * 11
        print(f"{dtype_name:9s} {rows:6d}x{h:<6d} | {cell('candidate'):>16s} | "
              f"{cell('F.rms_norm'):>16s} | {cell('compile'):>16s} | "
              f"{ratio('F.rms_norm'):>11s} {ratio('compile'):>10s}"
              + (f" | copy {cell('copy')}" if "copy" in t else ""))
    print("# TB/s = (x read + weight read once + y write) / median time; ratio > 1: candidate faster")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
