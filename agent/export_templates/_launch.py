"""Launches the exported cubin on torch tensors through cuda-python's driver binding
(cuda.bindings.driver: cuLibraryLoadData, cuLibraryGetKernel, cuKernelGetFunction,
cuOccupancyMaxActiveBlocksPerMultiprocessor, cuLaunchKernel) on torch's current stream, with the
trusted wrapper's launch rule (kernels/dispatch.cpp, op::plan_launch). Kernel parameters are
passed as an array of addresses of numpy scalars, as in cuda-python's own examples, packed in the
declaration's canonical ABI (_config.ABI, from op::abi: tensor pointers, rows, the variable axes,
each batched tensor's row stride, the scalars; kernels/abi_pack.cpp packs the same for the GPU
worker's cudaLaunchKernel). The kernel signature is _config.KERNEL_SIGNATURE.
"""
import pathlib
import threading

import numpy as np
import torch
from cuda.bindings import driver as cu

from . import _config

DEFAULT_DYNAMIC_SMEM = 48 * 1024  # what a kernel gets without opting in, on every CUDA device

_lock = threading.Lock()
_library = None
_functions = {}  # (device index, dtype name) -> (CUfunction, blocks per SM or None)


def _check(result):
    """Raises on a driver error; returns the call's value(s) (cuda-python returns (err, *values))."""
    if not isinstance(result, tuple):
        result = (result,)
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"{_config.PACKAGE}: CUDA driver call failed: {err}")
    return values[0] if len(values) == 1 else (tuple(values) if values else None)


def _load_library():
    global _library
    if _library is None:
        _check(cu.cuInit(0))
        cubin = (pathlib.Path(__file__).parent / "kernel.cubin").read_bytes()
        _library = _check(cu.cuLibraryLoadData(cubin, None, None, 0, None, None, 0))
    return _library


def dynamic_smem(width: int) -> int:
    """Dynamic shared memory bytes of the launch rule: fixed_bytes + bytes_per_<row axis> *
    width."""
    per_unit = getattr(_config, f"SMEM_BYTES_PER_{_config.ROW_AXIS}")
    return _config.SMEM_FIXED_BYTES + per_unit * width


def _function(device_index: int, dtype_name: str, smem: int):
    """The CUfunction of dtype's entry point in the current context, with its smem limit raised
    when the launch needs more than 48 KiB, and the persistent grid's blocks per SM."""
    # Keyed by smem too: the opt-in limit and the occupancy depend on the launch's dynamic smem.
    key = (device_index, dtype_name, smem)
    with _lock:
        if key in _functions:
            return _functions[key]
        kernel = _check(cu.cuLibraryGetKernel(_load_library(),
                                              _config.ENTRY_POINTS[dtype_name].encode()))
        func = _check(cu.cuKernelGetFunction(kernel))
        if smem > DEFAULT_DYNAMIC_SMEM:
            _check(cu.cuFuncSetAttribute(
                func, cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                smem))
        per_sm = None
        if _config.GRID == "persistent":
            per_sm = _check(cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(
                func, _config.BLOCK_THREADS, smem))
        _functions[key] = (func, per_sm)
        return _functions[key]


def grid_blocks(rows: int, device_index: int, dtype_name: str, smem: int) -> int:
    """per_rows: ceil(rows / rows_per_block); persistent: min(that, blocks_per_sm * SMs).
    0 means the kernel does not fit on an SM (the caller routes to the reference)."""
    rpb = max(1, _config.ROWS_PER_BLOCK)
    blocks = (rows + rpb - 1) // rpb
    if _config.GRID == "persistent":
        _, per_sm = _function(device_index, dtype_name, smem)
        sms = torch.cuda.get_device_properties(device_index).multi_processor_count
        blocks = min(blocks, max(0, per_sm) * sms)
    return blocks


# numpy types of the ABI's parameter classes (kernels/declaration.h, AbiParam::c_type).
_SCALAR_TYPES = {"float": np.float32, "int": np.int32, "long long": np.int64}


def _values(tensors, rows: int, width: int, row_strides: dict, scalars) -> list:
    """One numpy scalar per kernel parameter, in ABI order (kernels/abi_pack.cpp, PackedArgs)."""
    values = []
    for name, kind, index, c_type in _config.ABI:
        if kind == "tensor":
            values.append(np.array([tensors[index].data_ptr()], dtype=np.uint64))
        elif kind == "rows":
            values.append(np.array([rows], dtype=np.int64))
        elif kind == "axis":
            if not -2**31 <= width < 2**31:
                raise ValueError(f"{_config.PACKAGE}: kernel argument '{name}' = {width} does not "
                                 f"fit its type int")
            values.append(np.array([width], dtype=np.int32))
        elif kind == "row_stride":
            values.append(np.array([row_strides[index]], dtype=np.int64))
        elif kind == "scalar":
            values.append(np.array([scalars[index]], dtype=_SCALAR_TYPES[c_type]))
        else:
            raise ValueError(f"{_config.PACKAGE}: unknown ABI parameter class {kind!r} of {name}")
    return values


def launch(tensors, rows: int, width: int, row_strides: dict, scalars, dtype_name: str,
           blocks: int) -> None:
    """Launches the candidate on torch's current stream of the tensors' device. `tensors` holds
    every declared tensor (declaration order, the fresh contiguous output included),
    `row_strides` the row stride in elements of each batched one (by declaration index),
    `scalars` the validated scalars (declaration order)."""
    device = tensors[0].device
    smem = dynamic_smem(width)
    func, _ = _function(device.index, dtype_name, smem)
    values = _values(tensors, rows, width, row_strides, scalars)
    params = np.array([v.ctypes.data for v in values], dtype=np.uint64)
    stream = cu.CUstream(torch.cuda.current_stream(device).cuda_stream)
    _check(cu.cuLaunchKernel(func, blocks, 1, 1, _config.BLOCK_THREADS, 1, 1, smem, stream,
                             params.ctypes.data, 0))
