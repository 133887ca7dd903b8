#!/usr/bin/env python3
"""Dump and time the kernel torch.compile (Inductor) generates for the seed's RMSNorm reference.

For each shape and dtype: compiles bench/compare_torch.py's seed_reference with dynamic=False,
writes the generated Python/Triton source (torch._inductor.utils.run_and_get_code) to
OUTDIR/<dtype>-<rows>x<h>.py, times the compiled call with compare_torch.py's time_paths (median
of --samples CUDA-event samples, L2 flushed before each, a GPU-side blocker so host overhead is not
timed) and prints one line per shape: time, effective TB/s (x read + weight + y write) and the
Triton kernels' launch metadata (num_warps, num_stages, shared bytes) from the Triton cache,
whose PTX and cubin files are copied to OUTDIR/triton/. Diagnostic only: no pass/fail.

usage: bench/inductor_kernel.py OUTDIR [--shapes float32:65536:4096 ...] [--samples 20]
"""
import argparse
import json
import os
import pathlib
import shutil
import sys
import tempfile

CACHE = pathlib.Path(tempfile.mkdtemp(prefix="kloop-triton-"))
os.environ["TRITON_CACHE_DIR"] = str(CACHE)  # before torch imports Triton

import torch  # noqa: E402

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from compare_torch import check, cu, seed_reference, time_paths  # noqa: E402
from torch._inductor.utils import run_and_get_code  # noqa: E402

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
DEFAULT = ["float32:65536:4096", "float32:16384:4096", "bfloat16:65536:4096",
           "bfloat16:32768:1009"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("outdir", type=pathlib.Path)
    ap.add_argument("--shapes", nargs="+", default=DEFAULT, help="dtype:rows:h")
    ap.add_argument("--samples", type=int, default=20)
    ap.add_argument("--eps", type=float, default=1e-6)
    args = ap.parse_args()
    args.outdir.mkdir(parents=True, exist_ok=True)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")
    check(cu.cuInit(0))
    clock_khz = check(cu.cuDeviceGetAttribute(
        cu.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_CLOCK_RATE, check(cu.cuDeviceGet(0))))
    blocker = int(300 * clock_khz / 1e3)
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"triton cache {CACHE}, {args.samples} samples, L2 flushed")
    for spec in args.shapes:
        dname, rows, h = spec.split(":")
        rows, h, dtype = int(rows), int(h), DTYPES[dname]
        torch._dynamo.reset()
        before = {p for p in CACHE.rglob("*") if p.is_file()}
        compiled = torch.compile(seed_reference, dynamic=False)
        g = torch.Generator(device="cuda").manual_seed(rows * 131 + h)
        x = (torch.rand(rows, h, device="cuda", generator=g) * 4 - 2).to(dtype)
        w = (torch.rand(h, device="cuda", generator=g) + 0.5).to(dtype)
        y, code = run_and_get_code(compiled, x, w, args.eps)
        ref = seed_reference(x, w, args.eps)
        ok = torch.allclose(y.float(), ref.float(), atol=1e-2, rtol=2e-2)
        (args.outdir / f"{dname}-{rows}x{h}.py").write_text("\n\n# ----\n\n".join(code))
        ms = time_paths({"compile": lambda: compiled(x, w, args.eps)}, (), args.samples, flush,
                        blocker)["compile"]
        tbps = (2 * rows * h + h) * x.element_size() / (ms * 1e-3) / 1e12
        meta = []
        for p in sorted({p for p in CACHE.rglob("*") if p.is_file()} - before):
            if p.suffix in (".ptx", ".cubin", ".ttgir", ".llir"):
                dst = args.outdir / "triton" / f"{dname}-{rows}x{h}"
                dst.mkdir(parents=True, exist_ok=True)
                shutil.copy(p, dst / p.name)
            if p.suffix == ".json" and not p.name.startswith("__grp__"):
                try:
                    m = json.loads(p.read_text())
                except ValueError:
                    continue
                if "num_warps" in m:
                    meta.append(f"{m.get('name', p.stem)}: warps {m.get('num_warps')} "
                                f"stages {m.get('num_stages')} shared {m.get('shared')}")
        print(f"{dname:9s} {rows:6d}x{h:<6d} {ms * 1e3:8.1f} us {tbps:5.2f} TB/s "
              f"{'ok' if ok else 'WRONG'} | {'; '.join(meta) or 'no triton metadata'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
