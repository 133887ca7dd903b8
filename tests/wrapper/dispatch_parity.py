#!/usr/bin/env python3
"""Runs the exported package's dispatch predicate (kloop_rmsnorm/_dispatch.py, unchanged) on call
metadata, without torch: a stand-in `torch` module gives the few names the predicate reads
(dtypes, Tensor, cuda.get_device_capability) and tensors carry only metadata (shape, strides in
elements, dtype, data_ptr in bytes, element_size). Used by tests/wrapper/dispatch_parity_test.cpp,
which compares every answer with the C++ predicate (kernels/dispatch.cpp, op::decide_dispatch).

usage: dispatch_parity.py PACKAGE_PARENT CALLS_JSON
CALLS_JSON: [{"shape": [...], "strides": [...], "dtype": "float32", "x_ptr": N, "w_stride": N,
              "w_ptr": N, "y_ptr": N, "capability": [9, 0]}, ...]
Prints [[route, why], ...] as JSON, one pair per call.
"""
import json
import sys
import types

DTYPES = {}


class _DType:
    def __init__(self, name, size):
        self.name, self.size = name, size

    def __repr__(self):
        return f"torch.{self.name}"


class _Device:
    type = "cuda"


class FakeTensor:
    """Metadata of a strided CUDA tensor, as the predicate reads it."""

    def __init__(self, shape, strides, dtype, ptr):
        self.shape = tuple(shape)
        self._strides = tuple(strides)
        self.dtype = DTYPES[dtype]
        self.device = _Device()
        self._ptr = ptr

    def dim(self):
        return len(self.shape)

    def stride(self, d):
        return self._strides[d]

    def data_ptr(self):
        return self._ptr

    def element_size(self):
        return self.dtype.size


def install_fake_torch():
    torch = types.ModuleType("torch")
    for name, size in (("float32", 4), ("float16", 2), ("bfloat16", 2), ("float64", 8)):
        DTYPES[name] = _DType(name, size)
        setattr(torch, name, DTYPES[name])
    torch.Tensor = FakeTensor
    torch.cuda = types.SimpleNamespace(get_device_capability=lambda device: CAPABILITY[0])
    sys.modules["torch"] = torch


CAPABILITY = [(9, 0)]


def main():
    parent, calls_path = sys.argv[1], sys.argv[2]
    install_fake_torch()
    sys.path.insert(0, parent)
    from kloop_rmsnorm import _dispatch  # noqa: E402 - after the stand-in is installed

    out = []
    for c in json.load(open(calls_path)):
        CAPABILITY[0] = tuple(c["capability"])
        x = FakeTensor(c["shape"], c["strides"], c["dtype"], c["x_ptr"])
        w = FakeTensor([c["shape"][-1]], [c["w_stride"]], c["dtype"], c["w_ptr"])
        out.append(list(_dispatch.decide(x, w, y_ptr=c["y_ptr"])))
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
