"""kloop_softmax: a kloop-verified row softmax kernel as a PyTorch custom operator.

    import kloop_softmax
    y = kloop_softmax.row_softmax(x)   # or torch.ops.kloop.row_softmax; torch.softmax(x, -1)

- Schema kloop::row_softmax(Tensor x) -> Tensor: no mutation, a fresh contiguous output of x's
  shape and dtype; a fake implementation for FakeTensor and torch.compile.
- Dispatch: calls inside the manifest's predicate (_dispatch.py, the trusted wrapper's rules) run
  the exported cubin; every other valid call (a last-dimension stride other than 1, outer
  dimensions that do not collapse to one row stride, a width past n_max, a CPU tensor, ...) runs
  the reference (_reference.py).
- Autograd: row_softmax() routes calls that need gradients (grad mode on and x requiring grad) to
  the differentiable reference; the op itself has a registered backward, the analytic derivative
  of the reference.
- Kill switch: KLOOP_SOFTMAX_DISABLE=1 (read on every call) routes every call to the reference.
- stats() returns the per-route counters; reset_stats() clears them.
"""
import warnings

import torch

from . import _config, _dispatch
from ._dispatch import (DTYPE_NAMES, KILL_SWITCH_ENV, kill_switch_active, metadata, reset_stats,
                        stats)
from ._reference import reference, reference_backward

__all__ = ["row_softmax", "reference", "stats", "reset_stats", "metadata", "kill_switch_active",
           "KILL_SWITCH_ENV"]

if not _config.PROMOTED:
    warnings.warn(
        f"kloop_softmax: this package was exported from session {_config.SESSION_ID} whose "
        f"candidate {_config.CANDIDATE_ID} was NOT promoted (status {_config.STATUS}); it is for "
        f"review and testing only, not for deployment", RuntimeWarning, stacklevel=2)


def _validate(x: torch.Tensor, fake: bool = False) -> None:
    """The contract's declared errors (kernels/softmax/reference.cpp, validate), same order:
    non_strided_layout, bad_rank, unsupported_dtype, unsupported_device. The fake impl also
    accepts meta tensors (shape propagation has no data to place)."""
    if x.layout != torch.strided:
        raise TypeError("row_softmax: x must be an ordinary strided tensor; convert a sparse input "
                        "with to_dense() first")
    if x.dim() < 1:
        raise ValueError("row_softmax: x must have at least 1 dimension [..., N] (softmax over the "
                         "last one); got a 0-d tensor: reshape it to [1]")
    if x.dtype not in DTYPE_NAMES:
        raise TypeError(f"row_softmax: x dtype {x.dtype} is not supported; use float16, bfloat16 "
                        f"or float32")
    devices = ("cpu", "cuda", "meta") if fake else ("cpu", "cuda")
    if x.device.type not in devices:
        raise ValueError(f"row_softmax: device {x.device} is not supported; use cpu or cuda")


@torch.library.custom_op("kloop::row_softmax", mutates_args=())
def _row_softmax_op(x: torch.Tensor) -> torch.Tensor:
    _validate(x)
    return _dispatch.forward((x,), (), reference)


@_row_softmax_op.register_fake
def _row_softmax_fake(x):
    _validate(x, fake=True)
    return x.new_empty(x.shape)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    _dispatch.count("backward")
    return reference_backward(grad, x) if ctx.needs_input_grad[0] else None


_row_softmax_op.register_autograd(_backward, setup_context=_setup_context)


def row_softmax(x: torch.Tensor) -> torch.Tensor:
    """y = softmax(x, dim=-1) (float32 math, result in x.dtype, PyTorch's non-finite semantics); a
    fresh tensor. Calls that need gradients run the differentiable reference; the rest go through
    torch.ops.kloop.row_softmax. Raises TypeError/ValueError for invalid inputs (checked here
    first, so a sparse x gets its declared error rather than the dispatcher's)."""
    _validate(x)
    if torch.is_grad_enabled() and x.requires_grad:
        _dispatch.count("autograd_reference", x.dtype, "x requires grad")
        return reference(x)
    return torch.ops.kloop.row_softmax(x)
