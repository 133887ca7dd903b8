#!/usr/bin/env python3
"""GPU checks of a package written by `kloop export ID --torch DIR` (plain asserts, no pytest).

usage: test_export.py PACKAGE_PARENT [--require-candidate] [--package kloop_rmsnorm|kloop_softmax]
PACKAGE_PARENT holds the package (kloop_rmsnorm/ or kloop_softmax/; --package picks one when it
holds both). Checks, each printed as PASS/FAIL with its evidence:
  clean import in a fresh interpreter; torch.library.opcheck on representative inputs; outputs
  against the contract's reference on the operator's case families (contiguous inputs, views:
  transposed, sliced, non-collapsible; offsets; empty outer dimensions; non-finite values: for
  softmax NaN, +inf, all -inf and partly -inf rows against PyTorch's semantics), with the route
  each call took; calls outside the predicate and calls needing gradients go to the reference
  (counters); gradients match autograd through the reference; the kill switch; torch.compile of
  a function calling the op; declared errors.
Exit 0 when every check passed, 1 otherwise, 3 when there is no CUDA device.
--require-candidate fails the run when no call ran the candidate kernel.
"""
import argparse
import importlib
import json
import os
import pathlib
import subprocess
import sys
import traceback

RESULTS = []
PACKAGES = ("kloop_rmsnorm", "kloop_softmax")


def check(name):
    def wrap(fn):
        def run(*a):
            try:
                evidence = fn(*a)
                RESULTS.append((name, True, evidence))
                print(f"PASS {name}: {evidence}")
            except Exception as e:  # noqa: BLE001 - every failure is reported, the run goes on
                RESULTS.append((name, False, repr(e)))
                print(f"FAIL {name}: {e!r}")
                traceback.print_exc()
        return run
    return wrap


def same_bits(torch, a, b):
    # Bit-for-bit (NaN == NaN of the same payload); torch.equal treats NaN as unequal.
    bits = torch.int32 if a.element_size() == 4 else torch.int16
    return torch.equal(a.view(bits), b.view(bits))


class Rmsnorm:
    """weighted_rmsnorm/1: args (x, weight, eps)."""
    eps = 1e-6

    def __init__(self, torch, K, cfg, dev):
        self.torch, self.K, self.cfg, self.dev = torch, K, cfg, dev
        self.fn = K.weighted_rmsnorm
        self.op = torch.ops.kloop.weighted_rmsnorm.default
        self.width = next(h for h in (4096, 2048, 1024, 8192, 512, 256, 128)
                          if cfg.H_MIN <= h <= cfg.H_MAX and h % cfg.H_MULTIPLE_OF == 0)

    def args(self, x, dtype=None):
        w = self.torch.randn(x.shape[-1], device=x.device).to(dtype or x.dtype)
        return (x, w, self.eps)

    def tensors(self, args):
        return args[:2]

    def clean_import_code(self):
        h = self.width
        return ("import json, kloop_rmsnorm as K, torch; x = torch.randn(4, %d, device='cuda');"
                "w = torch.ones(%d, device='cuda'); K.weighted_rmsnorm(x, w, 1e-6);"
                "torch.cuda.synchronize(); print(json.dumps({'meta': K.metadata()['status'],"
                " 'stats': K.stats()}))") % (h, h)

    def opcheck_samples(self):
        torch, dev, h = self.torch, self.dev, self.width
        return [
            (torch.randn(8, h, device=dev), torch.randn(h, device=dev), self.eps),
            (torch.randn(4, 3, h, device=dev, dtype=torch.float16),
             torch.randn(h, device=dev, dtype=torch.float16), self.eps),
            (torch.randn(16, h, device=dev, dtype=torch.bfloat16)[::2],
             torch.randn(h, device=dev, dtype=torch.bfloat16), self.eps),
            (torch.randn(h, 6, device=dev).t(), torch.randn(h, device=dev), self.eps),
            (torch.randn(0, h, device=dev), torch.randn(h, device=dev), self.eps),
            (torch.randn(5, 1009, device=dev, requires_grad=True),
             torch.randn(1009, device=dev, requires_grad=True), self.eps),
            (torch.randn(3, h, device=dev, requires_grad=True),
             torch.randn(h, device=dev, requires_grad=True), self.eps),
        ]

    def families(self, run_case, dtype):
        torch, dev, h = self.torch, self.dev, self.width
        mk = lambda *s: torch.randn(*s, device=dev, dtype=torch.float32).to(dtype)
        w = mk(h)
        seen = [run_case(f"contiguous {dtype}", (mk(64, h), w, self.eps)),
                run_case(f"3d {dtype}", (mk(2, 33, h), w, self.eps))]
        for width in (1, 127, 1009, 4099):
            seen.append(run_case(f"width {width} {dtype}", (mk(7, width), mk(width), self.eps)))
        seen.append(run_case(f"transposed {dtype}", (mk(h, 12).t(), w, self.eps), "reference"))
        seen.append(run_case(f"sliced rows {dtype}", (mk(64, h)[::3], w, self.eps)))
        big = mk(4, 8, h)
        seen.append(run_case(f"non-collapsible {dtype}", (big[:, :3], w, self.eps), "reference"))
        flat = mk(1 + 16 * h)
        seen.append(run_case(f"offset 1 element {dtype}", (flat[1:].view(16, h), w, self.eps)))
        seen.append(run_case(f"offset {h} elements {dtype}",
                             (flat[h:h + 15 * h].view(15, h), w, self.eps)))
        seen.append(run_case(f"empty outer {dtype}", (mk(0, h), w, self.eps), "no_launch"))
        seen.append(run_case(f"empty middle {dtype}", (mk(2, 0, h), w, self.eps), "no_launch"))
        vals = mk(4, h)
        vals[0, :5] = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e19, 2e19])
        seen.append(run_case(f"non-finite {dtype}", (vals, w, self.eps)))
        return seen

    def outside(self, dtype):
        torch, dev, h = self.torch, self.dev, self.width
        x = torch.randn(4, h, device=dev).to(dtype)
        wide = torch.randn(2 * h, device=dev).to(dtype)
        cases = [("cpu", (x.cpu(), wide[:h].cpu(), self.eps)),
                 ("non-contiguous weight", (x, wide[::2], self.eps)),
                 ("last-dim stride 2",
                  (torch.randn(4, 2 * h, device=dev).to(dtype)[:, ::2], wide[:h], self.eps))]
        if self.cfg.H_MULTIPLE_OF > 1:
            m = self.cfg.H_MULTIPLE_OF + 1
            cases.append(("H not a multiple", (torch.randn(4, m, device=dev).to(dtype),
                                               torch.randn(m, device=dev).to(dtype), self.eps)))
        return cases

    def grads(self):
        torch, dev, h = self.torch, self.dev, self.width
        x = torch.randn(6, h, device=dev, requires_grad=True)
        w = torch.randn(h, device=dev, requires_grad=True)
        return (x, w, self.eps), (1e-4, 1e-3)

    def errors(self):
        torch, dev, fn, eps = self.torch, self.dev, self.fn, self.eps
        x = torch.randn(4, 8, device=dev)
        return [(lambda: fn(x, torch.ones(7, device=dev), eps), ValueError),
                (lambda: fn(x, torch.ones(8, device=dev).half(), eps), TypeError),
                (lambda: fn(x, torch.ones(8, device=dev), 0.0), ValueError),
                (lambda: fn(x, torch.ones(8, device=dev), float("nan")), ValueError),
                (lambda: fn(x.int(), torch.ones(8, device=dev).int(), eps), TypeError)]


class Softmax:
    """row_softmax/1: args (x,)."""

    def __init__(self, torch, K, cfg, dev):
        self.torch, self.K, self.cfg, self.dev = torch, K, cfg, dev
        self.fn = K.row_softmax
        self.op = torch.ops.kloop.row_softmax.default
        self.width = next(n for n in (4096, 2048, 1024, 8192, 512, 256, 128, 32768)
                          if cfg.N_MIN <= n <= cfg.N_MAX and n % cfg.N_MULTIPLE_OF == 0)

    def args(self, x, dtype=None):
        return (x,)

    def tensors(self, args):
        return args

    def clean_import_code(self):
        return ("import json, kloop_softmax as K, torch; x = torch.randn(4, %d, device='cuda');"
                "K.row_softmax(x); torch.cuda.synchronize();"
                "print(json.dumps({'meta': K.metadata()['status'], 'stats': K.stats()}))"
                ) % self.width

    def opcheck_samples(self):
        torch, dev, n = self.torch, self.dev, self.width
        return [
            (torch.randn(8, n, device=dev),),
            (torch.randn(4, 3, n, device=dev, dtype=torch.float16),),
            (torch.randn(16, n, device=dev, dtype=torch.bfloat16)[::2],),
            (torch.randn(n, 6, device=dev).t(),),
            (torch.randn(0, n, device=dev),),
            (torch.randn(3, 0, device=dev),),
            (torch.randn(5, 1009, device=dev, requires_grad=True),),
            (torch.randn(3, n, device=dev, requires_grad=True),),
        ]

    def families(self, run_case, dtype):
        """The public suite's families (kernels/softmax/cases*.cpp) at small sizes: widths
        (primes, 2^k +- 1), layouts (kernels/case_layout.h), values incl. the non-finite rows."""
        torch, dev, n = self.torch, self.dev, self.width
        mk = lambda *s: torch.randn(*s, device=dev, dtype=torch.float32).to(dtype)
        inf, nan = float("inf"), float("nan")
        seen = [run_case(f"contiguous {dtype}", (mk(64, n),)),
                run_case(f"3d {dtype}", (mk(2, 33, n),)),
                run_case(f"1d {dtype}", (mk(n),))]
        for width in (1, 2, 31, 127, 129, 1009, 4095, 4099, 32768):
            seen.append(run_case(f"width {width} {dtype}", (mk(7, width),)))
        seen.append(run_case(f"transposed {dtype}", (mk(n, 12).t(),), "reference"))
        seen.append(run_case(f"sliced rows {dtype}", (mk(64, n)[::3],)))
        seen.append(run_case(f"sliced gaps {dtype}", (mk(16, n + 37)[:, 5:5 + n],)))
        big = mk(4, 8, n)
        seen.append(run_case(f"non-collapsible {dtype}", (big[:, :3],), "reference"))
        seen.append(run_case(f"expanded {dtype}", (mk(1, n).expand(6, n),)))
        flat = mk(1 + 16 * n)
        seen.append(run_case(f"offset 1 element {dtype}", (flat[1:].view(16, n),)))
        seen.append(run_case(f"offset {n} elements {dtype}", (flat[n:n + 15 * n].view(15, n),)))
        seen.append(run_case(f"empty outer {dtype}", (mk(0, n),), "no_launch"))
        seen.append(run_case(f"empty middle {dtype}", (mk(2, 0, n),), "no_launch"))
        seen.append(run_case(f"N == 0 {dtype}", (mk(3, 0),), "no_launch"))
        big_vals = torch.finfo(dtype).max
        vals = [("logits x8", mk(8, n) * 8), ("1e4 + noise", 1e4 + mk(8, n)),
                ("-1e4 + noise", -1e4 + mk(8, n)),
                ("+-max", (torch.rand(8, n, device=dev) * 0.5 + 0.5).to(dtype) * big_vals),
                ("all equal", torch.full((4, n), 1.0, device=dev, dtype=dtype))]
        for label, v in vals:
            seen.append(run_case(f"{label} {dtype}", (v.to(dtype),)))
        rows = mk(8, n)
        rows[0, :] = -inf                     # every element -inf: NaN row
        rows[1, 3] = nan                      # a NaN: NaN row
        rows[2, 7] = inf                      # a +inf: NaN row
        rows[3, 0], rows[3, 5] = inf, -inf    # +inf and -inf: NaN row
        rows[4, : n // 2] = -inf              # leading -inf, finite max: exact zeros
        rows[5, ::3] = -inf                   # scattered -inf
        causal = mk(4, n).masked_fill(torch.ones(4, n, device=dev).triu(1).bool(), -inf)
        seen.append(run_case(f"non-finite rows {dtype}", (rows,)))
        seen.append(run_case(f"causal mask {dtype}", (causal,)))
        return seen

    def semantics(self, y, x):
        """PyTorch's non-finite rules (kernels/softmax/reference.h), asserted directly."""
        torch = self.torch
        xf = x.float().reshape(-1, x.shape[-1]) if x.numel() else None
        if xf is None:
            return
        yf = y.float().reshape(-1, x.shape[-1])
        nan_row = torch.isnan(xf).any(-1) | torch.isposinf(xf).any(-1) | torch.isneginf(xf).all(-1)
        assert torch.isnan(yf[nan_row]).all(), "a NaN, +inf or all -inf row is not NaN everywhere"
        fin = ~nan_row
        assert not torch.isnan(yf[fin]).any(), "a row with a finite max has NaN"
        assert (yf[fin][torch.isneginf(xf[fin])] == 0).all(), "a -inf element is not exactly 0"
        assert ((yf[fin] >= 0) & (yf[fin] <= 1)).all(), "an output outside [0, 1]"

    def outside(self, dtype):
        torch, dev, n = self.torch, self.dev, self.width
        x = torch.randn(4, n, device=dev).to(dtype)
        cases = [("cpu", (x.cpu(),)),
                 ("last-dim stride 2", (torch.randn(4, 2 * n, device=dev).to(dtype)[:, ::2],)),
                 ("transposed", (torch.randn(n, 4, device=dev).to(dtype).t(),))]
        if self.cfg.N_MULTIPLE_OF > 1:
            m = self.cfg.N_MULTIPLE_OF + 1
            cases.append(("N not a multiple", (torch.randn(4, m, device=dev).to(dtype),)))
        if self.cfg.N_MAX < 2**24:
            cases.append(("N past n_max",
                          (torch.randn(2, self.cfg.N_MAX + 1, device=dev).to(dtype),)))
        return cases

    def grads(self):
        x = self.torch.randn(6, self.width, device=self.dev, requires_grad=True)
        return (x,), (1e-5, None)

    def errors(self):
        torch, dev, fn = self.torch, self.dev, self.fn
        x = torch.randn(4, 8, device=dev)
        return [(lambda: fn(x.to_sparse()), TypeError),
                (lambda: fn(torch.tensor(1.0, device=dev)), ValueError),
                (lambda: fn(x.double()), TypeError),
                (lambda: fn(x.int()), TypeError)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("parent", type=pathlib.Path)
    ap.add_argument("--require-candidate", action="store_true")
    ap.add_argument("--package", choices=PACKAGES)
    args = ap.parse_args()
    found = [p for p in PACKAGES if (args.parent / p / "__init__.py").exists()]
    package = args.package or (found[0] if len(found) == 1 else None)
    if package not in found:
        print(f"no single package in {args.parent} (found {found}); pass --package")
        return 1
    sys.path.insert(0, str(args.parent))
    import torch
    if not torch.cuda.is_available():
        print("skip: torch sees no CUDA device")
        return 3
    cfg = importlib.import_module(f"{package}._config")
    os.environ.pop(cfg.KILL_SWITCH_ENV, None)
    K = importlib.import_module(package)
    from importlib import import_module
    _dispatch = import_module(f"{package}._dispatch")

    dev = "cuda"
    dtypes = [torch.float32, torch.float16, torch.bfloat16]
    op = (Rmsnorm if package == "kloop_rmsnorm" else Softmax)(torch, K, cfg, dev)
    fit_dtypes = [d for d in dtypes if _dispatch.DTYPE_NAMES[d] in cfg.ENTRY_POINTS]
    print(f"# package {package}: session {cfg.SESSION_ID} candidate {cfg.CANDIDATE_ID} promoted "
          f"{cfg.PROMOTED}; {cfg.DISPATCH_TEXT}; torch {torch.__version__}; "
          f"{torch.cuda.get_device_name(0)}")

    def tol(dtype):
        t = cfg.TOLERANCE[_dispatch.DTYPE_NAMES[dtype]]
        return t["atol"], t["rtol"]

    def compare(y, a):
        x = a[0]
        ref = K.reference(*a)
        atol, rtol = tol(x.dtype)
        torch.testing.assert_close(y, ref, atol=atol, rtol=rtol, equal_nan=True)
        assert y.shape == x.shape and y.dtype == x.dtype and y.is_contiguous()
        if hasattr(op, "semantics"):
            op.semantics(y, x)

    def run_case(label, a, expect_route=None):
        tensors = op.tensors(a)
        before_bits = [t.clone() for t in tensors]
        route, why = _dispatch.decide(*tensors)
        before = K.stats()
        y = op.fn(*a)
        torch.cuda.synchronize()
        after = K.stats()
        took = [r for r in ("candidate", "reference", "no_launch") if after[r] != before[r]]
        assert took == [route], f"{label}: decide says {route} but counters moved {took}"
        if expect_route:
            assert route == expect_route, f"{label}: expected {expect_route}, got {route} ({why})"
        compare(y, a)
        for t, t0 in zip(tensors, before_bits):
            assert same_bits(torch, t, t0), f"{label}: inputs changed"
            if y.numel():
                assert y.data_ptr() != t.data_ptr(), f"{label}: output aliases an input"
        return f"{label}->{route}" + (f" ({why})" if why else "")

    @check("clean import in a fresh interpreter")
    def clean_import():
        env = dict(os.environ, PYTHONPATH=str(args.parent))
        out = subprocess.run([sys.executable, "-c", op.clean_import_code()], env=env,
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip().splitlines()[-1]

    @check("torch.library.opcheck")
    def opcheck():
        reports = []
        samples = op.opcheck_samples()
        for a in samples:
            res = torch.library.opcheck(op.op, a)
            bad = {k: v for k, v in res.items() if v != "SUCCESS"}
            assert not bad, f"opcheck on {tuple(a[0].shape)} {a[0].dtype}: {bad}"
            reports.append(res)
        return f"{len(samples)} samples, tests {sorted(reports[0])} all SUCCESS"

    @check("outputs match the contract's reference on the case families")
    def families():
        seen = []
        for dtype in dtypes:
            seen += op.families(run_case, dtype)
        n_cand = sum("->candidate" in s for s in seen)
        if args.require_candidate:
            assert n_cand > 0, "no call ran the candidate kernel"
        return f"{len(seen)} cases, {n_cand} on the candidate; " + "; ".join(seen[:6])

    @check("calls outside the predicate go to the reference (counted)")
    def outside():
        K.reset_stats()
        cases = op.outside(fit_dtypes[0] if fit_dtypes else torch.float32)
        for label, a in cases:
            assert _dispatch.decide(*op.tensors(a))[0] == "reference", label
            compare(op.fn(*a), a)
        st = K.stats()
        assert st["reference"] == len(cases) and st["candidate"] == 0, st
        return f"reference {st['reference']}: {st['reference_reasons']}"

    @check("calls needing gradients run the differentiable reference; gradients match")
    def grads():
        K.reset_stats()
        a, (atol0, atol1) = op.grads()
        inputs = [t for t in op.tensors(a) if t.requires_grad]
        y = op.fn(*a)
        assert K.stats()["autograd_reference"] == 1 and K.stats()["candidate"] == 0
        g = torch.randn_like(y)
        want = torch.autograd.grad(y, inputs, g)
        copies = [t.detach().clone().requires_grad_() for t in inputs]
        a2 = tuple(copies) + tuple(a[len(copies):])
        y2 = op.op(*a2)  # the op's registered backward
        got = torch.autograd.grad(y2, copies, g)
        for i, (gw, gg) in enumerate(zip(want, got)):
            torch.testing.assert_close(gg, gw, atol=atol0 if i == 0 else atol1, rtol=1e-4)
        with torch.no_grad():
            op.fn(*a)  # grad mode off: not the autograd route
        st = K.stats()
        assert st["autograd_reference"] == 1 and st["backward"] == 1, st
        return {k: st[k] for k in ("autograd_reference", "backward", "candidate", "reference")}

    @check("kill switch routes every call to the reference without a restart")
    def kill_switch():
        K.reset_stats()
        a = op.args(torch.randn(8, op.width, device=dev))
        os.environ[cfg.KILL_SWITCH_ENV] = "1"
        try:
            y = op.fn(*a)
        finally:
            del os.environ[cfg.KILL_SWITCH_ENV]
        compare(y, a)
        mid = K.stats()
        assert mid["kill_switch"] == 1 and mid["candidate"] == 0, mid
        op.fn(*a)
        after = K.stats()
        assert after["kill_switch"] == 1
        return {k: after[k] for k in ("kill_switch", "candidate", "reference")}

    @check("torch.compile of a function calling the op runs and matches")
    def compiled():
        torch._dynamo.reset()

        # Scaling by 2 is exact in binary floating point, so the comparison with the reference
        # keeps the op's own error (an added constant would cancel digits: y + 1 with y near -1
        # turns a 1-ulp difference of y into a 1 % relative difference of the sum).
        # Scalars (RMSNorm's eps) are constants of the compiled function, tensors its inputs.
        a0 = op.args(torch.randn(1, op.width, device=dev))
        scalars = a0[len(op.tensors(a0)):]

        def block(x, *rest):
            return op.fn(x * 1.5, *rest, *scalars) * 2.0

        fn = torch.compile(block)
        out = []
        for dtype in dtypes:
            a = op.args(torch.randn(32, op.width, device=dev).to(dtype))
            tensors = op.tensors(a)
            K.reset_stats()
            got = fn(*tensors)
            # The compiled graph calls the same kernel on the same inputs as eager mode: same bits.
            eager = block(*tensors)
            assert same_bits(torch, got, eager), f"{dtype}: torch.compile output differs from eager"
            atol, rtol = tol(dtype)
            want = K.reference(a[0] * 1.5, *a[1:]) * 2.0
            torch.testing.assert_close(got, want, atol=atol * 2, rtol=rtol)
            out.append(f"{_dispatch.DTYPE_NAMES[dtype]}: {K.stats()['specialisations']}")
        return "; ".join(out)

    @check("invalid inputs raise the declared errors")
    def errors():
        bad = op.errors()
        for fn, exc in bad:
            try:
                fn()
            except exc:
                continue
            raise AssertionError(f"expected {exc.__name__}")
        return f"{len(bad)} declared errors raised"

    clean_import()
    opcheck()
    families()
    outside()
    grads()
    kill_switch()
    compiled()
    errors()
    failed = [n for n, ok, _ in RESULTS if not ok]
    print(json.dumps({"package": package, "checks": len(RESULTS), "failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
