"""The program generator's reduction forms (a mixin of gen.Generator): dims, keepdim, dtype,
indices, norms, and pairwise-then-reduce, each with its error bound against eager."""
import math

import torch

from gen_common import ULP, Reject, _finite_max


class ReductionForms:
    def fused_stage(self, inner):
        """(inner.unsqueeze(d) OP w).<reduction> for a new input w that is full along the new dim:
        a fused reduction over a reduction's value, the chain's fused last stage
        (chain_fused_reductions), like the kernel product (K[:, :, None] * b[None]).sum(1).
        Returns the outer reduction's value, or None."""
        rng = self.rng
        t = inner.t
        if not 1 <= t.dim() <= 3 or t.numel() > 4000:
            return None
        d = rng.randint(0, t.dim())
        shape = list(t.shape)
        shape.insert(d, rng.choice([1, 2, 3, 5, 16]))
        wshape = [s if i == d or rng.random() < 0.6 else 1 for i, s in enumerate(shape)]
        while rng.random() < 0.5 and len(wshape) > 1 and wshape[0] == 1:
            wshape = wshape[1:]
        dtype = t.dtype if t.dtype.is_floating_point else torch.float32
        w = self.new_input(wshape, dtype)
        view = self.emit(f"{inner.name}.unsqueeze({d})", "unsqueeze", lambda out: inner.err)
        if view is None:
            return None
        op = rng.choice(["*", "*", "-", "+", "minimum"])
        expr = f"torch.minimum({view.name}, {w.name})" if op == "minimum" else f"{view.name} {op} {w.name}"
        err = (lambda out: self._mul(view, w, out)) if op == "*" else (lambda out: self._lin(view, w, out))
        mapped = self.emit(expr, "elementwise", err)
        return self.reduction(mapped) if mapped is not None else None

    def reduction(self, v=None):
        rng = self.rng
        v = v or self.operand()
        t = v.t
        r = t.dim()
        n = v.name
        if r >= 2 and not v.param and rng.random() < 0.15:
            # a reduction of a transposed intermediate (log-domain Sinkhorn's column update)
            a, b = rng.sample(range(r), 2)
            a, b = (a - r if rng.random() < 0.5 else a), (b - r if rng.random() < 0.5 else b)
            n, t = (f"{n}.t()", t.t()) if r == 2 and rng.random() < 0.3 else (f"{n}.transpose({a}, {b})",
                                                                           t.transpose(a, b))
            self.forms.add("transposed_reduce")
        dims = None
        if r >= 1 and rng.random() < 0.8:
            k = rng.randint(1, min(r, 2))
            dims = sorted(rng.sample(range(r), k))
            dims = [d - r if rng.random() < 0.4 else d for d in dims]
        keep = rng.random() < 0.3
        ks = ", keepdim=True" if keep else ""
        dl = f"[{', '.join(map(str, dims))}]" if dims else None
        one = str(dims[0]) if dims else "-1"
        dt = ""
        if rng.random() < 0.15:
            dt = f", dtype={rng.choice(['torch.float64', 'torch.float32', 'torch.int64'])}"
        kind = rng.choice(["sum", "sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "any", "all",
                           "max_dim", "min_dim", "max_idx", "max_match", "logsumexp", "norm", "vector_norm", "var", "std",
                           "softmax", "log_softmax", "div_sum"])
        if kind == "div_sum" and r == 0:
            kind = "softmax"
        red = set(range(r)) if dims is None else {d % r for d in dims}
        nred = math.prod(t.shape[d] for d in red) if r else 1
        if kind == "sum":
            expr = f"torch.sum({n}, {dl}{ks}{dt})" if dl else f"{n}.sum({dt[2:]})"
        elif kind == "mean":
            expr = f"{n}.mean({dl}{ks}{dt})" if dl else f"torch.mean({n}{dt})"
        elif kind == "prod":
            expr = f"{n}.prod({one}{ks}{dt})"
            red = {int(one) % r} if r else set()
            nred = t.shape[int(one)] if r else 1
        elif kind in ("amax", "amin"):
            expr = f"{n}.{kind}({dl or '[]'}{ks})" if rng.random() < 0.5 else f"torch.{kind}({n}, dim={dl or '[]'}{ks})"
        elif kind in ("argmax", "argmin"):
            expr = f"{n}.{kind}({one}{ks})" if dims else f"torch.{kind}({n})"
        elif kind in ("any", "all"):
            expr = f"{n}.{kind}({one}{ks})" if dims else f"torch.{kind}({n})"
        elif kind in ("max_dim", "min_dim"):
            expr = f"torch.{kind[:3]}({n}, {one}{ks})[0]"
        elif kind == "max_idx":
            expr = f"{n}.{rng.choice(['max', 'min'])}(dim={one}{ks})[1]"
        elif kind == "max_match":
            # a Matcher-style step over both outputs of one max (CSE merges the calls):
            # fold_indices_epilogue makes it the max's epilogue.
            m, thr = rng.choice(["max", "min"]), rng.choice(["0.5", "0", "-1.5"])
            best = f"{n}.{m}(dim={one}{ks})"
            expr = f"torch.where({best}[0] < {thr}, torch.full_like({best}[1], -1), {best}[1])"
        elif kind == "logsumexp":
            expr = f"torch.logsumexp({n}, {dl or '[' + one + ']'}{ks})"
        elif kind in ("softmax", "log_softmax"):
            sdt = ", dtype=torch.float64" if rng.random() < 0.1 else ""
            expr = f"torch.{kind}({n}, {one}{sdt})" if r else f"torch.{kind}({n}, 0{sdt})"
            red = {int(one) % r} if r else set()
            nred = t.shape[int(one)] if r else 1
        elif kind == "div_sum":  # a normalization by the sum (DEC, a softmax written out)
            expr = f"{n} / {n}.sum({one}, keepdim=True)"
            red, nred = {int(one) % r}, t.shape[int(one)]
        elif kind in ("var", "std"):
            corr = rng.choice(["", ", correction=0", ", correction=2", ", unbiased=False"])
            if "unbiased" in corr and not dl:
                corr = ""
            expr = f"torch.{kind}({n}, {dl or '[' + one + ']'}{corr}{ks})"
        elif kind == "norm":
            expr = f"{n}.norm({rng.choice(['2.0', '1.0'])}, {dl or '[' + one + ']'}{ks})"
        else:
            order = rng.choice(["2.0", "1.0", 'float("inf")'])
            expr = f"torch.linalg.vector_norm({n}, {order}, {dl}{ks}{dt})"
        if kind in ("argmax", "argmin", "max_dim", "min_dim", "max_idx", "max_match", "softmax", "log_softmax") and dims:
            red, nred = {int(one) % r}, t.shape[int(one)]

        def err(out):
            if kind in ("argmax", "argmin", "max_idx", "max_match", "any", "all"):
                self.need_exact(v)
                return 0.0
            if kind in ("amax", "amin", "max_dim", "min_dim"):
                return v.err
            if not out.dtype.is_floating_point:
                self.need_exact(v)
                return 0.0
            if nred == 0:
                return v.err
            if not t.dtype.is_floating_point and out.dtype == torch.float64:
                return 0.0 if nred < 2 ** 20 else self.ulp_err(out)
            x = t.double()
            dd = sorted(red)
            eps = ULP[out.dtype]
            if kind in ("sum", "mean"):
                s = x.abs().sum(dd) if dd else x.abs()
                S = _finite_max(s)
                if S * 2 > torch.finfo(out.dtype).max * 0.25:
                    raise Reject()
                e = 2 * nred * eps * S + nred * v.err
                return (e / nred if kind == "mean" else e) + self.ulp_err(out)
            if kind == "prod":
                self.need_exact(v)
                # Partial products must stay in range in any order (else overflow/underflow
                # meets a zero or not depending on the order): bound them in log space over
                # the finite, non-zero factors.
                ax = x.abs()
                ok = torch.isfinite(ax) & (ax != 0)
                la = torch.where(ok, ax.log(), torch.zeros_like(ax))
                hi = la.clamp(min=0).sum(dd[0]) if dd else la.clamp(min=0)
                lo = la.clamp(max=0).sum(dd[0]) if dd else la.clamp(max=0)
                info = torch.finfo(out.dtype)
                if hi.numel() and (float(hi.max()) > math.log(info.max * 0.25)
                                   or float(lo.min()) < math.log(info.tiny * 1e6)):
                    raise Reject()
                return 2 * (nred + 1) * eps * _finite_max(out)
            if kind == "logsumexp":
                return 4 * eps * (nred + 2 + _finite_max(out)) + v.err
            if kind == "softmax":
                # Results in [0, 1]: the sum's order moves each by (nred + 2) ulps of 1 at most;
                # an input error d moves exp(x - max) / sum by a factor e^(2d).
                return 4 * eps * (nred + 2) + 2 * v.err
            if kind == "log_softmax":
                # x - (max + log(sum)) rounds at the inputs' magnitude.
                return 4 * eps * (nred + 2 + _finite_max(x)) + 2 * v.err
            if kind == "div_sum":
                # x / s: the sum's order moves s by 2 nred eps sum|x|, each quotient by that
                # relative to |s|; rows that (nearly) cancel are not compared.
                self.need_exact(v)
                d0 = dd[0]
                s, S = x.sum(d0, keepdim=True).abs(), x.abs().sum(d0, keepdim=True)
                fin = torch.isfinite(s) & torch.isfinite(S)
                if not bool(fin.all()) or (s.numel() and float(s.min()) <= 1e-3 * float(S.max())):
                    raise Reject()
                rel = float((S / s).max()) if s.numel() else 0.0
                return 2 * (nred + 2) * eps * rel * _finite_max(out) + self.ulp_err(out)
            if kind in ("var", "std"):
                # Both fold with Welford in double (eager's CPU algorithm): for float32 values only
                # the final rounding and the input's own error remain; float64 values fold in
                # their own precision, in an order that moves the result by nred ulps of mx^2.
                mx = _finite_max(x)
                e = 4 * eps * (_finite_max(out) + mx * mx) + 4 * mx * v.err
                if x.dtype == torch.float64:
                    e += 2 * nred * eps * mx * mx
                return math.sqrt(e) + 4 * eps * _finite_max(out) if kind == "std" else e
            # norms
            return 2 * (nred + 1) * eps * (_finite_max(out) + _finite_max(x)) + nred * v.err

        out = self.emit(expr, f"reduce:{kind}", err)
        if out is not None and not v.param:
            self.forms.add("pairwise_then_reduce")
        return out
