#!/usr/bin/env python3
"""GPU checks of a package written by `kloop export ID --torch DIR` (plain asserts, no pytest).

usage: test_export.py PACKAGE_PARENT [--require-candidate]
PACKAGE_PARENT holds kloop_rmsnorm/. Checks, each printed as PASS/FAIL with its evidence:
  clean import in a fresh interpreter; torch.library.opcheck on representative inputs; outputs
  against the seed's reference on contiguous inputs, views (transposed, sliced, non-collapsible),
  offsets and empty outer dimensions, with the route each call took; calls outside the predicate
  and calls needing gradients go to the reference (counters); gradients match autograd through
  the reference; the kill switch; torch.compile of a function calling the op; declared errors.
Exit 0 when every check passed, 1 otherwise, 3 when there is no CUDA device.
--require-candidate fails the run when no call ran the candidate kernel.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import traceback

RESULTS = []


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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("parent", type=pathlib.Path)
    ap.add_argument("--require-candidate", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(args.parent))
    os.environ.pop("KLOOP_RMSNORM_DISABLE", None)
    import torch
    if not torch.cuda.is_available():
        print("skip: torch sees no CUDA device")
        return 3
    import kloop_rmsnorm as K
    from kloop_rmsnorm import _config, _dispatch

    dev = "cuda"
    eps = 1e-6
    dtypes = [torch.float32, torch.float16, torch.bfloat16]
    h_fit = next(h for h in (4096, 2048, 1024, 8192, 512, 256, 128)
                 if _config.H_MIN <= h <= _config.H_MAX and h % _config.H_MULTIPLE_OF == 0)
    fit_dtypes = [d for d in dtypes if _dispatch.DTYPE_NAMES[d] in _config.ENTRY_POINTS]
    print(f"# package: session {_config.SESSION_ID} candidate {_config.CANDIDATE_ID} promoted "
          f"{_config.PROMOTED}; {_config.DISPATCH_TEXT}; torch {torch.__version__}; "
          f"{torch.cuda.get_device_name(0)}")

    def tol(dtype):
        t = _config.TOLERANCE[_dispatch.DTYPE_NAMES[dtype]]
        return t["atol"], t["rtol"]

    def compare(y, x, w, e=eps):
        ref = K.reference(x, w, e)
        atol, rtol = tol(x.dtype)
        torch.testing.assert_close(y, ref, atol=atol, rtol=rtol, equal_nan=True)
        assert y.shape == x.shape and y.dtype == x.dtype and y.is_contiguous()

    def same_bits(a, b):
        # Bit-for-bit (NaN == NaN of the same payload); torch.equal treats NaN as unequal.
        bits = torch.int32 if a.element_size() == 4 else torch.int16
        return torch.equal(a.view(bits), b.view(bits))

    def run_case(label, x, w, expect_route=None):
        x0, w0 = x.clone(), w.clone()
        route, why = _dispatch.decide(x, w)
        before = K.stats()
        y = K.weighted_rmsnorm(x, w, eps)
        torch.cuda.synchronize()
        after = K.stats()
        took = [r for r in ("candidate", "reference", "no_launch") if after[r] != before[r]]
        assert took == [route], f"{label}: decide says {route} but counters moved {took}"
        if expect_route:
            assert route == expect_route, f"{label}: expected {expect_route}, got {route} ({why})"
        compare(y, x, w)
        assert same_bits(x, x0) and same_bits(w, w0), f"{label}: inputs changed"
        if y.numel():
            assert y.data_ptr() != x.data_ptr(), f"{label}: output aliases x"
        return f"{label}->{route}" + (f" ({why})" if why else "")

    @check("clean import in a fresh interpreter")
    def clean_import():
        code = ("import json, kloop_rmsnorm as K, torch; x = torch.randn(4, %d, device='cuda');"
                "w = torch.ones(%d, device='cuda'); K.weighted_rmsnorm(x, w, 1e-6);"
                "torch.cuda.synchronize(); print(json.dumps({'meta': K.metadata()['status'],"
                " 'stats': K.stats()}))") % (h_fit, h_fit)
        env = dict(os.environ, PYTHONPATH=str(args.parent))
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip().splitlines()[-1]

    @check("torch.library.opcheck")
    def opcheck():
        samples = [
            (torch.randn(8, h_fit, device=dev), torch.randn(h_fit, device=dev)),
            (torch.randn(4, 3, h_fit, device=dev, dtype=torch.float16),
             torch.randn(h_fit, device=dev, dtype=torch.float16)),
            (torch.randn(16, h_fit, device=dev, dtype=torch.bfloat16)[::2],
             torch.randn(h_fit, device=dev, dtype=torch.bfloat16)),
            (torch.randn(h_fit, 6, device=dev).t(), torch.randn(h_fit, device=dev)),
            (torch.randn(0, h_fit, device=dev), torch.randn(h_fit, device=dev)),
            (torch.randn(5, 1009, device=dev, requires_grad=True),
             torch.randn(1009, device=dev, requires_grad=True)),
            (torch.randn(3, h_fit, device=dev, requires_grad=True),
             torch.randn(h_fit, device=dev, requires_grad=True)),
        ]
        reports = []
        for x, w in samples:
            res = torch.library.opcheck(torch.ops.kloop.weighted_rmsnorm.default, (x, w, eps))
            bad = {k: v for k, v in res.items() if v != "SUCCESS"}
            assert not bad, f"opcheck on {tuple(x.shape)} {x.dtype}: {bad}"
            reports.append(res)
        return f"{len(samples)} samples, tests {sorted(reports[0])} all SUCCESS"

    @check("outputs match the seed's reference on the public case families")
    def families():
        seen = []
        for dtype in dtypes:
            mk = lambda *s: torch.randn(*s, device=dev, dtype=torch.float32).to(dtype)
            w = mk(h_fit)
            seen.append(run_case(f"contiguous {dtype}", mk(64, h_fit), w))
            seen.append(run_case(f"3d {dtype}", mk(2, 33, h_fit), w))
            for h in (1, 127, 1009, 4099):
                seen.append(run_case(f"width {h} {dtype}", mk(7, h), mk(h)))
            seen.append(run_case(f"transposed {dtype}", mk(h_fit, 12).t(), w, "reference"))
            seen.append(run_case(f"sliced rows {dtype}", mk(64, h_fit)[::3], w))
            big = mk(4, 8, h_fit)
            seen.append(run_case(f"non-collapsible {dtype}", big[:, :3], w, "reference"))
            flat = mk(1 + 16 * h_fit)
            seen.append(run_case(f"offset 1 element {dtype}", flat[1:].view(16, h_fit), w))
            seen.append(run_case(f"offset {h_fit} elements {dtype}",
                                 flat[h_fit:h_fit + 15 * h_fit].view(15, h_fit), w))
            seen.append(run_case(f"empty outer {dtype}", mk(0, h_fit), w, "no_launch"))
            seen.append(run_case(f"empty middle {dtype}", mk(2, 0, h_fit), w, "no_launch"))
            vals = mk(4, h_fit)
            vals[0, :5] = torch.tensor([float("nan"), float("inf"), -float("inf"), 1e19, 2e19])
            seen.append(run_case(f"non-finite {dtype}", vals, w))
        n_cand = sum("->candidate" in s for s in seen)
        if args.require_candidate:
            assert n_cand > 0, "no call ran the candidate kernel"
        return f"{len(seen)} cases, {n_cand} on the candidate; " + "; ".join(seen[:6])

    @check("calls outside the predicate go to the reference (counted)")
    def outside():
        K.reset_stats()
        dtype = fit_dtypes[0] if fit_dtypes else torch.float32
        x = torch.randn(4, h_fit, device=dev).to(dtype)
        wide = torch.randn(2 * h_fit, device=dev).to(dtype)
        cases = [("cpu", x.cpu(), wide[:h_fit].cpu()),
                 ("non-contiguous weight", x, wide[::2]),
                 ("last-dim stride 2", torch.randn(4, 2 * h_fit, device=dev).to(dtype)[:, ::2],
                  wide[:h_fit])]
        if _config.H_MULTIPLE_OF > 1:
            h = _config.H_MULTIPLE_OF + 1
            cases.append(("H not a multiple", torch.randn(4, h, device=dev).to(dtype),
                          torch.randn(h, device=dev).to(dtype)))
        for label, xi, wi in cases:
            assert _dispatch.decide(xi, wi)[0] == "reference", label
            compare(K.weighted_rmsnorm(xi, wi, eps), xi, wi)
        st = K.stats()
        assert st["reference"] == len(cases) and st["candidate"] == 0, st
        return f"reference {st['reference']}: {st['reference_reasons']}"

    @check("calls needing gradients run the differentiable reference; gradients match")
    def grads():
        K.reset_stats()
        x = torch.randn(6, h_fit, device=dev, requires_grad=True)
        w = torch.randn(h_fit, device=dev, requires_grad=True)
        y = K.weighted_rmsnorm(x, w, eps)
        assert K.stats()["autograd_reference"] == 1 and K.stats()["candidate"] == 0
        g = torch.randn_like(y)
        dx, dw = torch.autograd.grad(y, (x, w), g)
        x2, w2 = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        y2 = torch.ops.kloop.weighted_rmsnorm(x2, w2, eps)  # the op's registered backward
        dx2, dw2 = torch.autograd.grad(y2, (x2, w2), g)
        torch.testing.assert_close(dx2, dx, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(dw2, dw, atol=1e-3, rtol=1e-4)
        with torch.no_grad():
            K.weighted_rmsnorm(x, w, eps)  # grad mode off: not the autograd route
        st = K.stats()
        assert st["autograd_reference"] == 1 and st["backward"] == 1, st
        return {k: st[k] for k in ("autograd_reference", "backward", "candidate", "reference")}

    @check("kill switch routes every call to the reference without a restart")
    def kill_switch():
        K.reset_stats()
        x = torch.randn(8, h_fit, device=dev)
        w = torch.randn(h_fit, device=dev)
        os.environ["KLOOP_RMSNORM_DISABLE"] = "1"
        try:
            y = K.weighted_rmsnorm(x, w, eps)
        finally:
            del os.environ["KLOOP_RMSNORM_DISABLE"]
        compare(y, x, w)
        mid = K.stats()
        assert mid["kill_switch"] == 1 and mid["candidate"] == 0, mid
        K.weighted_rmsnorm(x, w, eps)
        after = K.stats()
        assert after["kill_switch"] == 1
        return {k: after[k] for k in ("kill_switch", "candidate", "reference")}

    @check("torch.compile of a function calling the op runs and matches")
    def compiled():
        torch._dynamo.reset()

        # Scaling by 2 is exact in binary floating point, so the comparison with the reference
        # keeps the op's own error (an added constant would cancel digits: y + 1 with y near -1
        # turns a 1-ulp difference of y into a 1 % relative difference of the sum).
        def block(x, w):
            return K.weighted_rmsnorm(x * 1.5, w, eps) * 2.0

        fn = torch.compile(block)
        out = []
        for dtype in dtypes:
            x = torch.randn(32, h_fit, device=dev).to(dtype)
            w = torch.randn(h_fit, device=dev).to(dtype)
            K.reset_stats()
            got = fn(x, w)
            # The compiled graph calls the same kernel on the same inputs as eager mode: same bits.
            eager = block(x, w)
            assert same_bits(got, eager), f"{dtype}: torch.compile output differs from eager mode"
            atol, rtol = tol(dtype)
            want = K.reference(x * 1.5, w, eps) * 2.0
            torch.testing.assert_close(got, want, atol=atol * 2, rtol=rtol)
            out.append(f"{_dispatch.DTYPE_NAMES[dtype]}: {K.stats()['specialisations']}")
        return "; ".join(out)

    @check("invalid inputs raise the declared errors")
    def errors():
        x = torch.randn(4, 8, device=dev)
        bad = [(lambda: K.weighted_rmsnorm(x, torch.ones(7, device=dev), eps), ValueError),
               (lambda: K.weighted_rmsnorm(x, torch.ones(8, device=dev).half(), eps), TypeError),
               (lambda: K.weighted_rmsnorm(x, torch.ones(8, device=dev), 0.0), ValueError),
               (lambda: K.weighted_rmsnorm(x, torch.ones(8, device=dev), float("nan")),
                ValueError),
               (lambda: K.weighted_rmsnorm(x.int(), torch.ones(8, device=dev).int(), eps),
                TypeError)]
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
    print(json.dumps({"checks": len(RESULTS), "failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
