#!/usr/bin/env python3
"""Writes test activations that mimic LLM hidden states for `kloop shadow` (tests/torch/).

Rows are heavy-tailed (Student-t, 3 degrees of freedom, times a log-normal per-token scale), a
few outlier channels carry 20-80x the typical magnitude (as in LLM residual streams), weights
vary around 1 with a few large gammas; short and long contexts, several widths, all three dtypes,
as .safetensors (tensors "x" and "weight", eps in __metadata__) and as .npy pairs
(NAME.x.npy + NAME.weight.npy, bfloat16 as uint16 bits with NAME.json {"dtype": "bfloat16"}).
Needs numpy only.

usage: make_activations.py OUTDIR [--scale small|device] [--seed 7]
  small: tiny shapes for CPU tests; device: long contexts up to 2048 x 4096 (about 100 MB).
"""
import argparse
import json
import pathlib
import struct
import sys

import numpy as np

SHAPES = {
    # name: (shape [..., H], eps or None for the default)
    "small": {"short_ctx": ((1, 7, 256), None), "long_ctx": ((1, 96, 256), 1e-5),
              "batch_odd": ((3, 5, 127), 1e-6)},
    "device": {"short_ctx": ((1, 7, 4096), None), "long_ctx": ((1, 2048, 4096), 1e-5),
               "batch_5120": ((4, 128, 5120), 1e-6), "odd_width": ((33, 1009), 1e-6),
               "decode_8192": ((16, 1, 8192), 1e-5)},
}
DTYPES = ("float32", "float16", "bfloat16")
ST_DTYPES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}


def hidden_states(rng, shape):
    """Heavy-tailed rows with a few outlier channels, float32."""
    h = shape[-1]
    x = rng.standard_t(3, size=shape).astype(np.float32)
    token_scale = rng.lognormal(mean=0.0, sigma=1.0, size=shape[:-1] + (1,)).astype(np.float32)
    x *= token_scale
    outliers = rng.choice(h, size=max(1, h // 1000), replace=False)
    x[..., outliers] *= rng.uniform(20, 80, size=outliers.size).astype(np.float32)
    return x


def weights(rng, h):
    w = rng.normal(1.0, 0.1, size=h).astype(np.float32)
    w[rng.choice(h, size=max(1, h // 500), replace=False)] *= 8
    return w


def to_bf16_bits(a):
    """float32 -> bfloat16 bit patterns (uint16), round to nearest even."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def as_dtype(a, dtype):
    if dtype == "float32":
        return a.astype(np.float32)
    if dtype == "float16":
        return a.astype(np.float16)
    return to_bf16_bits(a)


def write_safetensors(path, tensors, dtype, metadata):
    header = {"__metadata__": metadata}
    blobs, offset = [], 0
    for name, arr in tensors.items():
        data = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": ST_DTYPES[dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)  # 8-byte aligned data start
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("out", type=pathlib.Path)
    ap.add_argument("--scale", choices=sorted(SHAPES), default="device")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    written = []
    for name, (shape, eps) in SHAPES[args.scale].items():
        x32, w32 = hidden_states(rng, shape), weights(rng, shape[-1])
        for dtype in DTYPES:
            x, w = as_dtype(x32, dtype), as_dtype(w32, dtype)
            stem = f"{name}_{dtype}"
            meta = {} if eps is None else {"eps": repr(eps)}
            write_safetensors(args.out / f"{stem}.safetensors", {"x": x, "weight": w}, dtype, meta)
            written.append(f"{stem}.safetensors")
            if name.startswith("short"):  # the .npy layout too, for one context per dtype
                np.save(args.out / f"{stem}_npy.x.npy", x)
                np.save(args.out / f"{stem}_npy.weight.npy", w)
                side = {"eps": eps} if eps is not None else {}
                if dtype == "bfloat16":
                    side["dtype"] = "bfloat16"
                if side:
                    (args.out / f"{stem}_npy.json").write_text(json.dumps(side))
                written.append(f"{stem}_npy.x.npy")
    print(f"wrote {len(written)} inputs to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
