"""The program generator's operand forms beyond single views (a mixin of gen.Generator): values
unpacked from chunk/split/unbind, buffers filled slice by slice before they are read, repeats
(of size-1 dims: broadcasts; of larger dims: tiles), masked writes `x[mask] = c`, guards that
read a value's metadata alone before it is reduced, a buffer accumulated in place coordinate by
coordinate in a loop, pairs of rows expanded, flattened, reduced row-wise and restored, and a min
or max over the dim a stack or cat of pieces made."""
import torch

from gen_common import ULP, StopProgram, Val, _finite_max


class OperandForms:
    def unpack_form(self, v=None):
        """`a, b = x.unsqueeze(1).chunk(2, -1)`, `a, b, c = x.unbind(-1)`: each piece an operand."""
        cands = [u for u in self.vals if u.t.dim() >= 1 and 2 <= u.t.shape[-1] <= 8]
        if not cands:
            return None
        v = v if v in cands else self.rng.choice(cands)
        n, r, k = v.name, v.t.dim(), v.t.shape[-1]
        opts = [f"{n}.chunk(2, -1)", f"{n}.unsqueeze(1).chunk(2, -1)", f"{n}.unsqueeze(0).chunk(2, {r})",
                f"{n}.split({max(1, k // 2)}, -1)", f"{n}.unsqueeze(1).split(1, -1)"]
        if k <= 4:
            opts += [f"{n}.unbind(-1)", f"{n}.unsqueeze(1).unbind({r})"]
        expr = self.rng.choice(opts)
        try:
            pieces = self.trial(expr)
        except Exception:  # noqa: BLE001 - eager rejects it: not a form worth keeping
            return None
        if not 2 <= len(pieces) <= 4:
            return None
        names = [self.fresh() for _ in pieces]
        self.lines.append(f"{', '.join(names)} = {expr}")
        self.forms.add("unpack_of_intermediate" if not v.param else "unpack")
        out = None
        for name, t in zip(names, pieces):
            self.env[name] = t
            out = Val(name, t, v.err, root=v.root)
            self.vals.append(out)
        return out

    def prefill_form(self):
        """y = torch.empty_like(x) (or zeros_like / clone); its slices written, then y read."""
        cands = [u for u in self.vals if u.t.dim() >= 1 and u.t.shape[-1] >= 2 and not u.err]
        if not cands:
            return None
        v = self.rng.choice(cands)
        n, k = v.name, v.t.shape[-1] // 2
        y = self.fresh()
        alloc = self.rng.choice([f"torch.empty_like({n})", f"torch.zeros_like({n})", f"{n}.clone()"])
        s = self.scalar()
        writes = [f"{y}[..., :{k}] = {n}[..., :{k}] + {n}[..., {k}:{2 * k}]",
                  f"{y}[..., {k}:] = {n}[..., {k}:] * {s}"]
        if alloc != f"torch.empty_like({n})" and v.t.dtype.is_floating_point and self.rng.random() < 0.5:
            writes[1] = f"{y}[..., {k}:] += {n}[..., {k}:]"  # an in-place update of the buffer
        if self.rng.random() < 0.3:
            writes.append(f"{y}[..., 0] = {n}[..., -1]")
        lines = [f"{y} = {alloc}"] + writes
        try:
            for line in lines:
                exec(line, {"torch": __import__("torch")}, self.env)
        except Exception:  # noqa: BLE001 - e.g. a float scalar into an integer buffer
            self.env.pop(y, None)
            return None
        self.lines += lines
        self.forms.add("prefilled_buffer")
        out = Val(y, self.env[y], 0.0)
        self.vals.append(out)
        return out

    def repeat_form(self, v=None):
        """x.unsqueeze(d).repeat(...) with the new dim repeated (a broadcast), or a tiling repeat."""
        cands = [u for u in self.vals if u.t.dim() >= 1]
        if not cands:
            return None
        v = v if v in cands else self.rng.choice(cands)
        n, r = v.name, v.t.dim()
        ones = ", ".join(["1"] * r)
        other = self.rng.choice(self.vals)
        count = (f"{other.name}.size(0)" if other.t.dim() >= 1 and self.rng.random() < 0.5
                 else str(self.rng.choice([1, 2, 3, 5])))
        opts = [(f"{n}.unsqueeze(0).repeat({count}, {ones})", "repeat"),
                (f"{n}.unsqueeze(1).repeat(1, {count}, {', '.join(['1'] * (r - 1))})".replace(", )", ")"), "repeat"),
                (f"{n}.repeat({count}, {ones})", "repeat"),
                (f"{n}.repeat({', '.join(['2'] + ['1'] * (r - 1))})", "repeat_tiles")]
        expr, form = self.rng.choice(opts)
        if v.t.numel() * 5 * max(1, other.t.shape[0] if other.t.dim() else 1) > 200000:
            return None  # keep repeated operands small
        return self.emit(expr, form, lambda out: v.err)

    def mask_write_form(self, v=None):
        """x[mask] = c on an intermediate: masks of x itself (comparisons, & of two, NaN tests),
        sometimes of another operand (another shape: index_put_ raises, or a broadcast one); c an
        integer, a float-exact or inexact float, inf."""
        cands = [u for u in self.vals if not u.param and u.root is None and not u.err]
        if not cands:
            return None
        v = v if v in cands else self.rng.choice(cands)
        n, s = v.name, self.scalar()
        other = self.operand(exclude=v, prefer_recent=False)
        mask = self.rng.choice([f"{n} < {s}", f"({n} > {s}) & ({n} <= 2)", f"{n} != {n}", f"~({n} >= 0)",
                                f"{n} == {n}", f"{other.name} > 0"])
        c = self.rng.choice(["0", "1", "-1", "-2", "3", "2.5", "0.1", 'float("inf")'])
        line = f"{n}[{mask}] = {c}"
        try:
            exec(line, {"torch": __import__("torch")}, self.env)
        except Exception:  # noqa: BLE001 - eager rejects it (index_put_ raises before writing)
            if self.rng.random() < 0.05:
                self.lines.append(line)
                self.forms.update({"mask_write", "error"})
                self.expect_error = True
                raise StopProgram()
            return None
        self.lines.append(line)
        self.forms.add("mask_write")
        return v

    def metadata_guard(self, v):
        """`if x.numel() == 0: raise` (torchvision's Matcher) or a size/dim test, before x is
        reduced: readers of x's metadata alone, which must not keep x from fusing."""
        n = v.name
        cond = self.rng.choice([f"{n}.numel() == 0", f"{n}.dim() > 0 and {n}.size(0) == 0",
                                f"{n}.shape[-1] == 0" if v.t.dim() else f"{n}.numel() == 0",
                                f"{n}.dtype == torch.bool and {n}.numel() > 100000"])
        self.lines += [f"if {cond}:", f'    raise ValueError("guard on {n}")']
        self.forms.add("metadata_guard")

    def triangle_form(self, v):
        """torch.triu/tril(v, k), or v.triu_(k) in place on a fresh value (YOLACT's fast NMS,
        SOLO's matrix NMS); a 1-D or 0-dim v makes eager raise."""
        op, k = self.rng.choice(["triu", "tril"]), self.rng.choice([0, 1, -1, 2])
        if not v.param and v.t.dim() >= 2 and self.rng.random() < 0.4:
            line = f"{v.name}.{op}_({k})"
            try:
                exec(line, {"torch": __import__("torch")}, self.env)
            except Exception:  # noqa: BLE001 - eager rejects it before writing
                return None
            self.lines.append(line)
            self.forms.add("triangle")
            return v
        return self.emit(f"torch.{op}({v.name}, {k})", "triangle", lambda out: v.err, keep_error_p=0.1)

    def zero_of_its_dtype_form(self, v):
        """torch.where(v > 0, v, torch.zeros(1, dtype=v.dtype, device=v.device)) (detectron2's
        IoU guard): v's dtype and device read alone beside its value."""
        n = v.name
        return self.emit(f"torch.where({n} > 0, {n}, torch.zeros(1, dtype={n}.dtype, device={n}.device))",
                         "zero_of_its_dtype", lambda out: v.err)

    def _row_pair(self):
        """Two exact floating [N, D] values of one D (maybe the same one twice), or None."""
        cands = [u for u in self.vals if u.t.dim() == 2 and 1 <= u.t.shape[1] <= 6 and not u.err
                 and u.t.dtype.is_floating_point]
        if not cands:
            return None
        u = self.rng.choice(cands)
        same = [w for w in cands if w.t.shape[1] == u.t.shape[1]]
        return u, self.rng.choice(same)

    def accumulate_form(self):
        """acc = zeros(N, M); for k in range(D): acc += op(u[:, None, k], w[None, :, k]): a loop
        over the coordinates accumulating in place (unrolled by tracing; scripted, a prim::Loop
        unroll_accumulations unrolls). The buffer's dtype may differ from the terms' (each += then
        rounds to it, or raises)."""
        pair = self._row_pair()
        if pair is None:
            return None
        u, w = pair
        d = u.t.shape[1]
        acc = self.fresh()
        if self.rng.random() < 0.3:
            # a mask accumulated with Python's augmented assignments (aten::__iand__ / __ior__ /
            # __ixor__), as point-in-box tests write it
            cmp = self.rng.choice([">", "<", ">=", "!="])
            op = self.rng.choice(["&=", "&=", "|=", "^="])
            lines = [f"{acc} = {u.name}[:, None, 0] {cmp} {w.name}[None, :, 0]",
                     f"for k in range(1, {d}):", f"    {acc} {op} ({u.name}[:, None, k] {cmp} {w.name}[None, :, k])"]
            exec("\n".join(lines), {"torch": torch}, self.env)
            self.lines += lines
            self.forms.add("mask_accumulate")
            out = Val(acc, self.env[acc], 0.0)
            self.vals.append(out)
            return out
        dtype = self.rng.choice(["", "", ", dtype=" + f"{u.name}.dtype", ", dtype=torch.float64", ", dtype=torch.int64"])
        term = self.rng.choice(["({a} - {b}).abs()", "({a} - {b}) * ({a} - {b})", "torch.minimum({a}, {b})",
                                "({a} > {b})", "{a} * {b}"])
        t = term.format(a=f"{u.name}[:, None, k]", b=f"{w.name}[None, :, k]")
        op = self.rng.choice(["+=", "+=", "-=", "*="])
        # (on the terms' device, as such code allocates it: a CPU buffer raises on CUDA)
        lines = [f"{acc} = torch.zeros({u.name}.size(0), {w.name}.size(0){dtype}, device={u.name}.device)",
                 f"for k in range({d}):", f"    {acc} {op} {t}"]
        try:
            exec("\n".join(lines), {"torch": torch}, self.env)
        except Exception:  # noqa: BLE001 - eager rejects it: a float term into an int64 buffer
            self.env.pop(acc, None)
            if self.rng.random() < 0.1:
                self.lines += lines
                self.error_out = Val(acc, None)
                self.forms.update({"accumulate_loop", "error"})
                self.expect_error = True
                raise StopProgram()
            return None
        self.lines += lines
        self.forms.add("accumulate_loop")
        out = Val(acc, self.env[acc], 0.0)  # the same ops in the same order: exact
        self.vals.append(out)
        return out

    def flatten_pairs_form(self):
        """Every pair of rows of u [N, D] and w [M, D] as expanded copies flattened to [N * M, D],
        a row-wise op over them, and the [N * M] result viewed as [N, M] (F.pairwise_distance
        over flattened pairs, as metric-learning and matching code spells it)."""
        pair = self._row_pair()
        if pair is None:
            return None
        u, w = pair
        sizes = f"{u.name}.size(0), {w.name}.size(0), {u.name}.size(1)"
        a, b, r = self.fresh(), self.fresh(), self.fresh()
        kind = self.rng.choice(["pairwise_distance", "abs_sum", "abs_amax", "min_amin"])
        row = {"pairwise_distance": f"torch.nn.functional.pairwise_distance({a}, {b})",
               "abs_sum": f"({a} - {b}).abs().sum(-1)",
               "abs_amax": f"({a} - {b}).abs().amax(-1, keepdim=True)",
               "min_amin": f"torch.minimum({a}, {b}).amin(-1)"}[kind]
        lines = [f"{a} = {u.name}[:, None, :].expand({sizes}).reshape(-1, {u.name}.size(1))",
                 f"{b} = {w.name}[None, :, :].expand({sizes}).reshape(-1, {u.name}.size(1))",
                 f"{r} = {row}.view({u.name}.size(0), {w.name}.size(0))"]
        try:
            exec("\n".join(lines), {"torch": torch}, self.env)
        except Exception:  # noqa: BLE001 - eager rejects it (reshape of 0 elements into [-1, 0])
            for name in (a, b, r):
                self.env.pop(name, None)
            return None
        out = self.env[r]
        # sums and norms may fold in another order than eager's: about a rounding unit per term
        err = 0.0
        if kind in ("pairwise_distance", "abs_sum"):
            err = (u.t.shape[1] + 4) * ULP[out.dtype] * _finite_max(out)
        self.lines += lines
        self.forms.add("flatten_pairs")
        v = Val(r, out, err)
        self.vals.append(v)
        return v

    def matvec_form(self):
        """Matrix-vector matmuls over an expanded operand, as soft k-means weighs points:
        w[:, None, :] @ u[None].expand(M, N, D) and the column form (a batch matmul reads in place:
        matmul runs), or the column dots of w and u against u's columns expanded over a batch
        matmul must copy, w.t()[:, None, None, :] @ u.t()[:, None, :, None].expand(D, 2, N, 3)
        (tsfuse sums the products). Matmul raises for operands of two dtypes."""
        cands = [u for u in self.vals if u.t.dim() == 2 and not u.err and u.t.dtype.is_floating_point]
        if not cands:
            return None
        u = self.rng.choice(cands)
        kind = self.rng.choice(["row", "column", "copied"])
        shape = (u.t.shape[0], u.t.shape[1]) if kind == "copied" else None
        ws = [w for w in self.vals if w.t.dim() == 2 and not w.err and w.t.dtype.is_floating_point
              and (tuple(w.t.shape) == shape if shape else w.t.shape[1] == u.t.shape[0])]
        # else the Gram form, u against itself
        w = self.rng.choice(ws) if ws else u if shape else Val(f"{u.name}.t()", u.t.t(), 0.0)
        sizes = f"{w.name}.size(0), {u.name}.size(0), {u.name}.size(1)"
        expr = {"row": f"({w.name}[:, None, :] @ {u.name}[None].expand({sizes})).squeeze(1)",
                "column": f"({u.name}[None].expand({sizes}).transpose(1, 2) @ {w.name}[:, :, None]).squeeze(-1)",
                "copied": f"({w.name}.t()[:, None, None, :] @ {u.name}.t()[:, None, :, None].expand("
                          f"{u.name}.size(1), 2, {u.name}.size(0), 3)).squeeze(2)"}[kind]

        def err(out):
            # a sum of N products in another order than the BLAS's: a rounding unit per term of sum |w||u|
            wa, ua = w.t.detach().double().abs(), u.t.detach().double().abs()
            terms = (wa * ua).sum(0) if kind == "copied" else wa @ ua
            return (u.t.shape[0] + 4) * ULP[out.dtype] * _finite_max(terms)

        # (eager rejects operands of two dtypes)
        return self.emit(expr, "matvec", err, keep_error_p=0.2)

    def stack_reduce_form(self, v=None):
        """torch.stack([v, v - w, ...], d).amin(d), or a cat of the pieces unsqueezed at d: a min
        or max over the dim the join made (detection assigners' point-in-box test). Pieces of
        other shapes make eager's stack or cat raise."""
        cands = [u for u in self.vals if u.t.dim() <= 3]
        if not cands:
            return None
        v = v if v in cands else self.rng.choice(cands)
        pieces, errs = [v.name], [v.err]
        for _ in range(self.rng.randint(1, 3)):
            w = self.rng.choice(self.vals)
            piece = self.rng.choice([f"({v.name} - {w.name})", f"torch.maximum({w.name}, {v.name})", f"-{v.name}",
                                     w.name])
            pieces.append(piece)
            errs.append(v.err + w.err)
        d = self.rng.randint(-(v.t.dim() + 1), v.t.dim())
        if self.rng.random() < 0.7:
            join = f"torch.stack([{', '.join(pieces)}], {d})"
        else:
            join = f"torch.cat([{', '.join(f'({p}).unsqueeze({d})' for p in pieces)}], {d})"
        red = self.rng.choice([f".amin({d})", f".amax({d}, keepdim=True)", f".min(dim={d})[0]",
                               f".max({d}, True)[0]"])
        return self.emit(join + red, "stack_reduce", lambda out: max(errs), keep_error_p=0.2)
