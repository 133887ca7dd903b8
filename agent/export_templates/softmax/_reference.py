"""The reference of row_softmax/1 and its reverse-mode derivative, in plain torch.

reference() is the contract's formula as torch computes it: softmax over the last dimension in
float32, one cast back to x.dtype (`torch.softmax(x.float(), -1).to(x.dtype)`), with PyTorch's
non-finite semantics, which the contract adopts (kernels/softmax/reference.h): a row holding a NaN
or a +inf, or whose every element is -inf, is NaN everywhere; a -inf element of a row with a
finite max is exactly 0; N == 0 gives an empty output. Every call outside the dispatch predicate,
every call under the kill switch and every call that needs gradients runs it. reference_backward()
is the analytic derivative of the same formula, used by the custom op's registered autograd.
"""
import torch


def reference(x: torch.Tensor) -> torch.Tensor:
    """y = exp(x - max(x)) / sum(exp(x - max(x))) over the last dimension in float32, cast back to
    x.dtype."""
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


def reference_backward(grad: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """dx of reference() for upstream gradient `grad`, computed in float32: with y = softmax(x),
    dx = y * (grad - sum(grad * y, -1))."""
    y = torch.softmax(x.float(), dim=-1)
    g = grad.float()
    dx = y * (g - (g * y).sum(dim=-1, keepdim=True))
    return dx.to(x.dtype)
