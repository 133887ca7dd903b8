"""kloop_rmsnorm: a kloop-verified weighted RMSNorm kernel as a PyTorch custom operator.

    import kloop_rmsnorm
    y = kloop_rmsnorm.weighted_rmsnorm(x, weight, eps)   # or torch.ops.kloop.weighted_rmsnorm

- Schema kloop::weighted_rmsnorm(Tensor x, Tensor weight, float eps) -> Tensor: no mutation, a
  fresh contiguous output of x's shape and dtype; a fake implementation for FakeTensor and
  torch.compile.
- Dispatch: calls inside the manifest's predicate (_dispatch.py, the trusted wrapper's rules) run
  the exported cubin; every other valid call runs the seed's reference (_reference.py).
- Autograd: weighted_rmsnorm() routes calls that need gradients (grad mode on and an input that
  requires grad) to the differentiable reference; the op itself has a registered backward, the
  analytic derivative of the reference.
- Kill switch: KLOOP_RMSNORM_DISABLE=1 (read on every call) routes every call to the reference.
- stats() returns the per-route counters; reset_stats() clears them.
"""
import math
import warnings

import numpy as np
import torch

from . import _config, _dispatch
from ._dispatch import (DTYPE_NAMES, KILL_SWITCH_ENV, kill_switch_active, metadata, reset_stats,
                        stats)
from ._reference import reference, reference_backward

__all__ = ["weighted_rmsnorm", "reference", "stats", "reset_stats", "metadata",
           "kill_switch_active", "KILL_SWITCH_ENV"]

if not _config.PROMOTED:
    warnings.warn(
        f"kloop_rmsnorm: this package was exported from session {_config.SESSION_ID} whose "
        f"candidate {_config.CANDIDATE_ID} was NOT promoted (status {_config.STATUS}); it is for "
        f"review and testing only, not for deployment", RuntimeWarning, stacklevel=2)


def _validate(x: torch.Tensor, weight: torch.Tensor, eps: float) -> None:
    """The contract's declared errors (kernels/rmsnorm/reference.cpp, validate), same order."""
    if x.layout != torch.strided or weight.layout != torch.strided:
        raise TypeError("weighted_rmsnorm: x and weight must be ordinary strided tensors; convert "
                        "sparse inputs with to_dense() first")
    if x.dim() < 1:
        raise ValueError("weighted_rmsnorm: x must have at least 1 dimension [..., H]; got a 0-d "
                         "tensor")
    h = x.shape[-1]
    if h <= 0:
        raise ValueError(f"weighted_rmsnorm: x's last dimension H must be > 0; x has shape "
                         f"{list(x.shape)}")
    if weight.dim() != 1 or weight.shape[0] != h:
        raise ValueError(f"weighted_rmsnorm: weight must have shape [{h}] (x's last dimension); "
                         f"got {list(weight.shape)}")
    if x.dtype not in DTYPE_NAMES:
        raise TypeError(f"weighted_rmsnorm: x dtype {x.dtype} is not supported; use float16, "
                        f"bfloat16 or float32")
    if weight.dtype != x.dtype:
        raise TypeError(f"weighted_rmsnorm: weight dtype {weight.dtype} differs from x dtype "
                        f"{x.dtype}; cast weight to x's dtype")
    if x.device != weight.device:
        raise ValueError(f"weighted_rmsnorm: x is on {x.device} but weight is on {weight.device}; "
                         f"move both to one device")
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"weighted_rmsnorm: eps must be an ordinary numeric scalar (float or "
                        f"int); got {type(eps).__name__}")
    value = float(eps)
    with np.errstate(over="ignore"):
        eps32 = float(np.float32(value)) if math.isfinite(value) else value
    if not math.isfinite(value) or value <= 0 or not math.isfinite(eps32) or eps32 <= 0:
        raise ValueError(f"weighted_rmsnorm: eps must be finite and positive, also after "
                         f"rounding to float32; got {eps!r}")


@torch.library.custom_op("kloop::weighted_rmsnorm", mutates_args=())
def _weighted_rmsnorm_op(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    _validate(x, weight, eps)
    return _dispatch.forward((x, weight), (eps,), reference)


@_weighted_rmsnorm_op.register_fake
def _weighted_rmsnorm_fake(x, weight, eps):
    _validate(x, weight, eps)
    return x.new_empty(x.shape)


def _setup_context(ctx, inputs, output):
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _backward(ctx, grad):
    x, weight = ctx.saved_tensors
    _dispatch.count("backward")
    dx, dw = reference_backward(grad, x, weight, ctx.eps)
    return (dx if ctx.needs_input_grad[0] else None,
            dw if ctx.needs_input_grad[1] else None, None)


_weighted_rmsnorm_op.register_autograd(_backward, setup_context=_setup_context)


def weighted_rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """y = x * rsqrt(mean(x^2, -1) + eps) * weight (float32 math, result in x.dtype); a fresh
    tensor. Calls that need gradients run the differentiable reference; the rest go through
    torch.ops.kloop.weighted_rmsnorm. Raises TypeError/ValueError for invalid inputs."""
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        _validate(x, weight, eps)
        _dispatch.count("autograd_reference", x.dtype, "an input requires grad")
        return reference(x, weight, eps)
    return torch.ops.kloop.weighted_rmsnorm(x, weight, eps)
