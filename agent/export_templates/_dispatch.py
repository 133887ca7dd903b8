"""The trusted wrapper of the exported operator on torch tensors: the dispatch predicate
(kernels/dispatch.cpp, op::decide_dispatch) evaluated on tensor metadata in the same order with
the same clauses, the routing of one validated call (kill switch, predicate, fresh output, grid,
launch) and its counters. Every value comes from _config.py, which kloop export generated from
the candidate's manifest.json and the operator's declaration (kernels/<op>/operator.cpp), so this
file is the same for every operator.

decide(*inputs) returns (route, why): route is "candidate", "reference" or "no_launch"; why names
the first clause that failed ("" for the candidate).
"""
import collections
import json
import math
import os
import pathlib
import threading

import torch

from . import _config

DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
MAX_GRID_X = 2147483647  # gridDim.x limit on sm_90 (CUDA C++ Programming Guide, technical specs)
KILL_SWITCH_ENV = _config.KILL_SWITCH_ENV
ROUTES = ("candidate", "reference", "no_launch", "kill_switch", "autograd_reference", "backward")

# The declaration's tensors: (name, role, batched); the passed ones (inputs) in call order.
_INPUTS = [(i, t[0], t[2]) for i, t in enumerate(_config.TENSORS) if t[1] == "input"]
_OUTPUT = next(i for i, t in enumerate(_config.TENSORS) if t[1] == "output")
_AXIS = _config.ROW_AXIS
_KEY = _AXIS.lower()

_stats_lock = threading.Lock()
_counts = collections.Counter()
_reasons = collections.Counter()
_specialisations = set()


def metadata() -> dict:
    """export.json: session, candidate, promotion status, hashes, dispatch predicate."""
    return json.loads((pathlib.Path(__file__).parent / "export.json").read_text())


def kill_switch_active() -> bool:
    """True when the kill switch variable (_config.KILL_SWITCH_ENV) is 1 (read on every call)."""
    return os.environ.get(KILL_SWITCH_ENV, "") == "1"


def count(route: str, dtype=None, why: str = "") -> None:
    with _stats_lock:
        _counts[route] += 1
        if why:
            _reasons[why] += 1
        if dtype is not None:
            _specialisations.add(f"{DTYPE_NAMES.get(dtype, str(dtype))}/{route}")


def stats() -> dict:
    """Counters since import or reset_stats(): calls per route (candidate, reference, no_launch,
    kill_switch, autograd_reference, backward), reference reasons, and the distinct
    specialisations used ("dtype/route")."""
    with _stats_lock:
        out = {k: _counts.get(k, 0) for k in ROUTES}
        out["reference_reasons"] = dict(_reasons)
        out["specialisations"] = sorted(_specialisations)
        return out


def reset_stats() -> None:
    with _stats_lock:
        _counts.clear()
        _reasons.clear()
        _specialisations.clear()


def rows_and_width(x: torch.Tensor):
    """(rows, width): rows is the product of x's outer dimensions, width its last one (the row
    axis, _config.ROW_AXIS)."""
    return math.prod(x.shape[:-1]), x.shape[-1]


def collapsed_row_stride(x: torch.Tensor):
    """Row stride (elements) of the [rows, width] view, or None when the outer dims do not
    collapse to one stride (kloop::collapsed_row_stride: size-1 dims are ignored)."""
    rows, width = rows_and_width(x)
    if rows == 0:
        return width
    row_stride = None
    inner_rows = 1
    for d in range(x.dim() - 2, -1, -1):
        size = x.shape[d]
        if size == 1:
            continue
        stride = x.stride(d)
        if row_stride is None:
            row_stride = stride
        elif stride != row_stride * inner_rows:
            return None
        inner_rows *= size
    return width if row_stride is None else row_stride


def is_row_major(t: torch.Tensor) -> bool:
    """Whether `t`'s strides are the row-major ones of its shape, size-1 dims ignored (what
    Tensor.is_contiguous() answers, from the metadata alone; kernels/tensor.h is_contiguous)."""
    expect = 1
    for d in range(t.dim() - 1, -1, -1):
        if t.shape[d] != 1 and t.stride(d) != expect:
            return False
        expect *= t.shape[d]
    return True


def per_rows_blocks(rows: int) -> int:
    rpb = max(1, _config.ROWS_PER_BLOCK)
    return 0 if rows <= 0 else (rows + rpb - 1) // rpb


def _axis_clause(width: int) -> str:
    lo = getattr(_config, f"{_AXIS}_MIN")
    hi = getattr(_config, f"{_AXIS}_MAX")
    multiple = getattr(_config, f"{_AXIS}_MULTIPLE_OF")
    if width < lo or width > hi:
        return f"{_AXIS}={width} outside [{_KEY}_min={lo}, {_KEY}_max={hi}]"
    if multiple > 1 and width % multiple != 0:
        return f"{_AXIS}={width} is not a multiple of {_KEY}_multiple_of={multiple}"
    return ""


def _layout_clause(tensors, rows: int, width: int) -> str:
    for (_, name, batched), t in zip(_INPUTS, tensors):
        if not batched:
            continue
        last_stride = 1 if width <= 1 else t.stride(-1)
        if last_stride != 1:
            return f"{name}'s last-dimension stride is {last_stride}, not 1"
        row_stride = collapsed_row_stride(t)
        if row_stride is None:
            return f"{name}'s outer dimensions do not collapse to one row stride"
        layout = getattr(_config, f"{name.upper()}_ROWS")
        if layout == "contiguous" and rows > 1 and row_stride != width:
            return (f"{name}_rows is contiguous but the row stride is {row_stride} "
                    f"({_AXIS}={width})")
    for (_, name, batched), t in zip(_INPUTS, tensors):
        if not batched and not (width <= 1 or is_row_major(t)):
            return f"{name} is not contiguous"
    return ""


def _alignment_clause(tensors, rows: int, width: int, y_ptr) -> str:
    a = _config.ALIGNMENT_BYTES
    if a <= 1:
        return ""
    nbytes = tensors[0].element_size()
    addresses = {i: t.data_ptr() for (i, _, _), t in zip(_INPUTS, tensors)}
    if y_ptr is not None:
        addresses[_OUTPUT] = y_ptr
    items = [(f"{name} address", addresses[i])
             for i, (name, _, _) in enumerate(_config.TENSORS) if i in addresses]
    for i, (name, role, batched) in enumerate(_config.TENSORS):
        if batched:
            stride = width
            if role == "input" and rows > 1:
                stride = collapsed_row_stride(tensors[[j for j, _, _ in _INPUTS].index(i)])
            items.append((f"{name} row stride in bytes", stride * nbytes))
    for what, value in items:
        if value % a != 0:
            return f"{what} (0x{value:x}) is not a multiple of alignment_bytes={a}"
    return ""


def decide(*tensors, y_ptr=None):
    """The dispatch decision for validated inputs (the declaration's input tensors in order);
    y_ptr (the fresh output's address) is checked for alignment when given."""
    if len(tensors) != len(_INPUTS):
        raise TypeError(f"decide takes the {len(_INPUTS)} input tensor(s) "
                        f"{[n for _, n, _ in _INPUTS]} and y_ptr= by keyword; got "
                        f"{len(tensors)} positional argument(s)")
    x = tensors[0]
    rows, width = rows_and_width(x)
    if rows == 0:
        return "no_launch", "rows == 0: nothing to launch"
    if width == 0:
        return "no_launch", f"{_AXIS} == 0: nothing to launch"
    for (_, name, _), t in zip(_INPUTS, tensors):
        if t.device.type != "cuda":
            return "reference", f"{name} is on {t.device.type}, not a CUDA device"
    name = DTYPE_NAMES.get(x.dtype)
    if name not in _config.ENTRY_POINTS:
        return "reference", f"dtype {name or x.dtype} has no entry point"
    major, minor = torch.cuda.get_device_capability(x.device)
    if _config.TARGET == "sm_90a" and (major, minor) != (9, 0):
        return "reference", (f"target sm_90a needs compute capability 9.0, device has "
                             f"{major}.{minor}")
    if _config.TARGET == "sm_90" and major != 9:
        return "reference", (f"an sm_90 cubin loads only on compute capability 9.x, device has "
                             f"{major}.{minor}")
    why = (_axis_clause(width) or _layout_clause(tensors, rows, width)
           or _alignment_clause(tensors, rows, width, y_ptr))
    if why:
        return "reference", why
    if per_rows_blocks(rows) > MAX_GRID_X:
        return "reference", f"{per_rows_blocks(rows)} blocks exceed gridDim.x <= {MAX_GRID_X}"
    return "candidate", ""


def forward(tensors, scalars, reference):
    """One validated call through the wrapper: the kill switch, the predicate, a fresh contiguous
    output of x's shape, its alignment and the grid, then the launch; every route counted.
    `reference(*tensors, *scalars)` serves whatever the candidate does not."""
    x = tensors[0]
    if kill_switch_active():
        count("kill_switch", x.dtype, f"{KILL_SWITCH_ENV}=1")
        return reference(*tensors, *scalars).contiguous()
    route, why = decide(*tensors)
    if route == "no_launch":
        count("no_launch", x.dtype)
        return x.new_empty(x.shape)
    if route == "reference":
        count("reference", x.dtype, why)
        return reference(*tensors, *scalars).contiguous()
    from . import _launch  # cuda-python is needed only on the candidate path
    rows, width = rows_and_width(x)
    name = DTYPE_NAMES[x.dtype]
    with torch.cuda.device(x.device):
        y = x.new_empty(x.shape)
        why = _alignment_clause(tensors, rows, width, y.data_ptr())
        if why:
            count("reference", x.dtype, why)
            return reference(*tensors, *scalars).contiguous()
        blocks = _launch.grid_blocks(rows, x.device.index, name, _launch.dynamic_smem(width))
        if blocks <= 0:
            why = "the persistent kernel does not fit on an SM (occupancy 0)"
            count("reference", x.dtype, why)
            return reference(*tensors, *scalars).contiguous()
        everything = [None] * len(_config.TENSORS)
        strides = {}
        for (i, _, batched), t in zip(_INPUTS, tensors):
            everything[i] = t
            if batched:
                strides[i] = collapsed_row_stride(t) if rows > 1 else width
        everything[_OUTPUT] = y
        strides[_OUTPUT] = width
        _launch.launch(everything, rows, width, strides, scalars, name, blocks)
    count("candidate", x.dtype)
    return y
