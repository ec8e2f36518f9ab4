"""The program generator's operand forms beyond single views (a mixin of gen.Generator): values
unpacked from chunk/split/unbind, buffers filled slice by slice before they are read, repeats
(of size-1 dims: broadcasts; of larger dims: tiles), masked writes `x[mask] = c`, and guards that
read a value's metadata alone before it is reduced."""

from gen_common import StopProgram, Val


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
