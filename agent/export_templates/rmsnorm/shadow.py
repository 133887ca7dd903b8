"""Shadow run (the seed's tier-2 evidence): the exported candidate and the reference side by side
on captured inputs, without serving anything.

    python3 -m kloop_rmsnorm.shadow --inputs DIR [--json] [--eps 1e-6]

Input layout (every file directly in DIR, any shapes [..., H]):
- NAME.safetensors holding tensors "x" ([..., H]) and "weight" ([H]) of one dtype (F32, F16 or
  BF16); optional "eps" in the "__metadata__" object (a string, e.g. "1e-05").
- NAME.x.npy and NAME.weight.npy (float32 or float16; bfloat16 as uint16 bit patterns), with an
  optional NAME.json {"dtype": "bfloat16", "eps": 1e-5}; "dtype" is needed only for bfloat16.

Per file it records the route the dispatch predicate chose, max abs and rel error, per-row max
error (worst rows and quantiles), non-finite mismatches, the contract tolerance check (element and
row rule of kernels/rmsnorm/contract.cpp), whether a repeated call is bitwise identical, and device
memory before, after and peak; overall, the distinct specialisations (dtype x route) used. Exit 0
when every file is within tolerance, 1 when any diverges, 2 for bad input, 3 when it cannot run
(no torch, no CUDA device, no cuda-python).
"""
import argparse
import json
import os
import pathlib
import struct
import sys
import time


def not_run(reason, as_json):
    if as_json:
        print(json.dumps({"status": "not_run", "reason": reason}))
    else:
        print(f"shadow: not run: {reason}", file=sys.stderr)
    return 3


SAFETENSORS_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def load_safetensors(path, torch):
    """{name: tensor} and the metadata of a .safetensors file (8-byte little-endian header size,
    a JSON header {name: {dtype, shape, data_offsets}}, then the data)."""
    raw = path.read_bytes()
    if len(raw) < 8:
        raise ValueError(f"{path.name}: too short for a safetensors file")
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    base = 8 + n
    meta = header.pop("__metadata__", {}) or {}
    out = {}
    for name, info in header.items():
        if info["dtype"] not in SAFETENSORS_DTYPES:
            raise ValueError(f"{path.name}: tensor {name} has dtype {info['dtype']}; use F32, F16 "
                             f"or BF16")
        begin, end = info["data_offsets"]
        dtype = getattr(torch, SAFETENSORS_DTYPES[info["dtype"]])
        buf = bytearray(raw[base + begin:base + end])
        t = torch.frombuffer(buf, dtype=torch.uint8) if buf else torch.empty(0, dtype=torch.uint8)
        out[name] = t.view(dtype).reshape(info["shape"])
    return out, meta


def load_npy_pair(x_path, torch, np):
    stem = x_path.name[:-len(".x.npy")]
    w_path = x_path.with_name(stem + ".weight.npy")
    if not w_path.exists():
        raise ValueError(f"{x_path.name} has no partner {w_path.name}")
    meta_path = x_path.with_name(stem + ".json")
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    tensors = {}
    for key, p in (("x", x_path), ("weight", w_path)):
        arr = np.load(p)
        if meta.get("dtype") == "bfloat16":
            if arr.dtype != np.uint16:
                raise ValueError(f"{p.name}: bfloat16 must be stored as uint16 bit patterns")
            tensors[key] = torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16)
        elif arr.dtype in (np.float32, np.float16):
            tensors[key] = torch.from_numpy(arr.copy())
        else:
            raise ValueError(f"{p.name}: dtype {arr.dtype}; use float32, float16 or uint16 with "
                             f"{stem}.json {{\"dtype\": \"bfloat16\"}}")
    return stem, tensors, meta


def collect_inputs(inputs, torch, np):
    """[(name, x, weight, eps or None)] in file-name order."""
    items = []
    for p in sorted(inputs.iterdir()):
        if p.name.endswith(".safetensors"):
            tensors, meta = load_safetensors(p, torch)
            for key in ("x", "weight"):
                if key not in tensors:
                    raise ValueError(f"{p.name}: no tensor named '{key}'")
            eps = float(meta["eps"]) if "eps" in meta else None
            items.append((p.name, tensors["x"], tensors["weight"], eps))
        elif p.name.endswith(".x.npy"):
            stem, tensors, meta = load_npy_pair(p, torch, np)
            items.append((stem + ".npy", tensors["x"], tensors["weight"], meta.get("eps")))
    return items


def divergence(actual, expected, tol, torch):
    """Element and row checks of the contract's tolerance rule, plus error statistics."""
    a = actual.double().reshape(-1, expected.shape[-1])
    e = expected.double().reshape(-1, expected.shape[-1])
    fin_e = torch.isfinite(e)
    fin_a = torch.isfinite(a)
    diff = torch.where(fin_e & fin_a, (a - e).abs(), torch.zeros_like(a))
    nan_e, inf_e = torch.isnan(e), torch.isinf(e)
    elem_ok = torch.where(fin_e, fin_a & (diff <= tol["atol"] + tol["rtol"] * e.abs()),
                          torch.where(nan_e, torch.isnan(a), a == e))
    non_finite_mismatch = int(((fin_e != fin_a) | (nan_e & ~torch.isnan(a)) |
                               (inf_e & (a != e))).sum())
    rel = diff / e.abs().clamp_min(1e-30)
    row_err = torch.where(fin_e, torch.where(fin_a, a - e, torch.zeros_like(a)),
                          torch.zeros_like(a)).norm(dim=-1)
    row_norm = torch.where(fin_e, e, torch.zeros_like(e)).norm(dim=-1)
    row_ok = row_err <= tol["row_rtol"] * row_norm.clamp_min(tol["row_floor"])
    row_max = diff.max(dim=-1).values if diff.shape[-1] else torch.zeros(diff.shape[0])
    out = {
        "elements": int(e.numel()),
        "rows": int(e.shape[0]),
        "max_abs_error": float(diff.max()) if diff.numel() else 0.0,
        "max_rel_error": float(rel.max()) if rel.numel() else 0.0,
        "element_failures": int((~elem_ok).sum()),
        "row_failures": int((~row_ok).sum()),
        "non_finite_mismatches": non_finite_mismatch,
        "non_finite_expected": int((~fin_e).sum()),
    }
    if row_max.numel():
        q = torch.quantile(row_max.float().cpu(), torch.tensor([0.5, 0.99]))
        worst = torch.topk(row_max, min(5, row_max.numel()))
        out["per_row_max_abs_error"] = {
            "p50": float(q[0]), "p99": float(q[1]), "max": float(row_max.max()),
            "worst_rows": [[int(i), float(v)] for v, i in zip(worst.values, worst.indices)]}
    out["within_tolerance"] = (out["element_failures"] == 0 and out["row_failures"] == 0
                               and non_finite_mismatch == 0)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m kloop_rmsnorm.shadow",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", type=pathlib.Path, required=True)
    ap.add_argument("--json", action="store_true", help="print one JSON report")
    ap.add_argument("--eps", type=float, default=1e-6, help="eps when a file names none")
    args = ap.parse_args(argv)
    try:
        import numpy as np
        import torch
    except ImportError as e:
        return not_run(f"python3 lacks {e.name}; install torch and numpy", args.json)
    if not torch.cuda.is_available():
        return not_run("torch sees no CUDA device", args.json)
    try:
        import cuda.bindings.driver  # noqa: F401
    except ImportError:
        return not_run("cuda-python (cuda.bindings) is not installed", args.json)
    os.environ.pop("KLOOP_RMSNORM_DISABLE", None)  # the shadow run measures the candidate
    import kloop_rmsnorm
    from kloop_rmsnorm import _config, _dispatch

    if not args.inputs.is_dir():
        print(f"shadow: --inputs {args.inputs} is not a directory", file=sys.stderr)
        return 2
    try:
        items = collect_inputs(args.inputs, torch, np)
    except (ValueError, KeyError, OSError) as e:
        print(f"shadow: bad input: {e}", file=sys.stderr)
        return 2
    if not items:
        print(f"shadow: no .safetensors or .x.npy files in {args.inputs}", file=sys.stderr)
        return 2
    kloop_rmsnorm.reset_stats()
    files = []
    start = time.monotonic()
    for name, x_cpu, w_cpu, eps in items:
        eps = args.eps if eps is None else eps
        x, w = x_cpu.cuda(), w_cpu.cuda()
        torch.cuda.synchronize()
        before = {"allocated": torch.cuda.memory_allocated(),
                  "reserved": torch.cuda.memory_reserved()}
        torch.cuda.reset_peak_memory_stats()
        route, why = _dispatch.decide(x, w)
        y = torch.ops.kloop.weighted_rmsnorm(x, w, eps)
        y2 = torch.ops.kloop.weighted_rmsnorm(x, w, eps)
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
        repeat_identical = bool(torch.equal(y.view(torch.uint8) if y.numel() else y,
                                            y2.view(torch.uint8) if y2.numel() else y2))
        del y2
        ref = kloop_rmsnorm.reference(x, w, eps)
        dtype = _dispatch.DTYPE_NAMES[x.dtype]
        entry = {"file": name, "dtype": dtype, "shape": list(x.shape), "eps": eps,
                 "route": route, "route_reason": why, "repeat_identical": repeat_identical}
        entry.update(divergence(y, ref, _config.TOLERANCE[dtype], torch))
        entry["pass"] = entry["within_tolerance"] and repeat_identical
        del y, ref
        torch.cuda.synchronize()
        entry["device_memory"] = {
            "before_allocated": before["allocated"], "before_reserved": before["reserved"],
            "after_allocated": torch.cuda.memory_allocated(),
            "after_reserved": torch.cuda.memory_reserved(), "peak_allocated": peak,
            "peak_over_before": peak - before["allocated"]}
        files.append(entry)
        del x, w
    st = kloop_rmsnorm.stats()
    report = {
        "status": "pass" if all(f["pass"] for f in files) else "fail",
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "session_id": _config.SESSION_ID, "candidate_id": _config.CANDIDATE_ID,
        "promoted": _config.PROMOTED, "cubin_sha256": _config.CUBIN_SHA256,
        "files": files,
        "specialisations": len(st["specialisations"]),
        "specialisation_keys": st["specialisations"],
        "routes": {k: st[k] for k in ("candidate", "reference", "no_launch", "kill_switch")},
        "wall_s": round(time.monotonic() - start, 3),
    }
    failed = [f["file"] for f in files if not f["pass"]]
    if failed:
        report["reason"] = f"{len(failed)} file(s) beyond the contract tolerance: {failed[:8]}"
    if args.json:
        print(json.dumps(report))
    else:
        for f in files:
            print(f"{f['file']:32s} {f['dtype']:9s} {f['route']:10s} max_abs "
                  f"{f['max_abs_error']:.3g} max_rel {f['max_rel_error']:.3g} "
                  f"{'PASS' if f['pass'] else 'FAIL'}")
        print(f"status {report['status']}, {report['specialisations']} specialisations")
    return 0 if report["status"] == "pass" else 1


if __name__ == "__main__":
    sys.exit(main())
