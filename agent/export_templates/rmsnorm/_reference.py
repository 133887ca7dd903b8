"""The seed's reference for weighted_rmsnorm/1 and its reverse-mode derivative, in plain torch.

reference() is the contract's formula (fp32 accumulation, eps rounded to float32 by torch's
scalar promotion, one cast back to x.dtype); every call outside the dispatch predicate, every call
under the kill switch and every call that needs gradients runs it. reference_backward() is the
analytic derivative of the same formula, used by the custom op's registered autograd.
"""
import torch


def reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """y = x * rsqrt(mean(x^2, -1) + eps) * weight in float32, cast back to x.dtype."""
    mean_square = x.float().square().mean(dim=-1, keepdim=True)
    normalized = x.float() * torch.rsqrt(mean_square + eps)
    return (normalized * weight.float()).to(x.dtype)


def reference_backward(grad: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, eps: float):
    """(dx, dw) of reference() for upstream gradient `grad`, computed in float32.

    With r = rsqrt(mean(x^2) + eps) and g = grad * w:  dx = r*g - x * r^3 * mean(g*x),
    dw = sum over rows of grad * x * r.
    """
    h = x.shape[-1]
    xf, wf, gf = x.float(), weight.float(), grad.float()
    r = torch.rsqrt(xf.square().mean(dim=-1, keepdim=True) + eps)
    gw = gf * wf
    dx = r * gw - xf * r.pow(3) * (gw * xf).mean(dim=-1, keepdim=True)
    dw = (gf * xf * r).reshape(-1, h).sum(dim=0)
    return dx.to(x.dtype), dw.to(weight.dtype)
