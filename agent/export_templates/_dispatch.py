"""The trusted wrapper's dispatch predicate (kernels/dispatch.cpp, op::decide_dispatch),
evaluated on torch tensor metadata in the same order with the same clauses. Values come from
_config.py, which kloop export generated from the candidate's manifest.json.

decide() returns (route, why): route is "candidate", "reference" or "no_launch"; why names the
first clause that failed ("" for the candidate).
"""
import math

import torch

from . import _config

DTYPE_NAMES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
MAX_GRID_X = 2147483647  # gridDim.x limit on sm_90 (CUDA C++ Programming Guide, technical specs)


def rows_and_width(x: torch.Tensor):
    """(rows, H): rows is the product of x's outer dimensions."""
    return math.prod(x.shape[:-1]), x.shape[-1]


def collapsed_row_stride(x: torch.Tensor):
    """Row stride (elements) of the [rows, H] view, or None when the outer dims do not collapse
    to one stride (kloop::collapsed_row_stride: size-1 dims are ignored)."""
    rows, h = rows_and_width(x)
    if rows == 0:
        return h
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
    return h if row_stride is None else row_stride


def per_rows_blocks(rows: int) -> int:
    rpb = max(1, _config.ROWS_PER_BLOCK)
    return 0 if rows <= 0 else (rows + rpb - 1) // rpb


def decide(x: torch.Tensor, weight: torch.Tensor, y_ptr=None):
    """The dispatch decision for validated inputs; y_ptr (the fresh output's address) is checked
    for alignment when given."""
    rows, h = rows_and_width(x)
    if rows == 0:
        return "no_launch", "rows == 0: nothing to launch"
    if x.device.type != "cuda" or weight.device.type != "cuda":
        return "reference", f"x is on {x.device.type}, not a CUDA device"
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
    if h < _config.H_MIN or h > _config.H_MAX:
        return "reference", f"H={h} outside [h_min={_config.H_MIN}, h_max={_config.H_MAX}]"
    if _config.H_MULTIPLE_OF > 1 and h % _config.H_MULTIPLE_OF != 0:
        return "reference", f"H={h} is not a multiple of h_multiple_of={_config.H_MULTIPLE_OF}"
    last_stride = 1 if h <= 1 else x.stride(-1)
    if last_stride != 1:
        return "reference", f"x's last-dimension stride is {last_stride}, not 1"
    row_stride = collapsed_row_stride(x)
    if row_stride is None:
        return "reference", "x's outer dimensions do not collapse to one row stride"
    if _config.X_ROWS == "contiguous" and rows > 1 and row_stride != h:
        return "reference", f"x_rows is contiguous but the row stride is {row_stride} (H={h})"
    if not (h <= 1 or weight.stride(-1) == 1):
        return "reference", "weight is not contiguous"
    a = _config.ALIGNMENT_BYTES
    if a > 1:
        nbytes = x.element_size()
        xs = row_stride if rows > 1 else h
        items = [("x address", x.data_ptr()), ("weight address", weight.data_ptr())]
        if y_ptr is not None:
            items.append(("y address", y_ptr))
        items += [("x row stride in bytes", xs * nbytes), ("y row stride in bytes", h * nbytes)]
        for what, value in items:
            if value % a != 0:
                return "reference", f"{what} (0x{value:x}) is not a multiple of alignment_bytes={a}"
    if per_rows_blocks(rows) > MAX_GRID_X:
        return "reference", f"{per_rows_blocks(rows)} blocks exceed gridDim.x <= {MAX_GRID_X}"
    return "candidate", ""
