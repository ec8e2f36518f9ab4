"""The differential fuzzer's gradient mode (run.py --grad, or TSFUSE_FUZZ_GRAD=1): each program
also runs with its float32/float64 tensor inputs requiring grad, and eager's gradients are
compared with the optimized program's.

Contract of one gradient run (`run_grad`, the same for eager, the optimized program and the
unoptimized TorchScript reference):
  * leaves: every float32/float64 tensor input (whatever its layout: a transposed, step-2 or
    expanded input is a leaf view that requires grad); float16/bfloat16, integer and bool inputs
    and scalar arguments do not require grad. A program without such an input is not run here;
  * outputs: the floating outputs that require grad, each with a fixed incoming gradient of its
    shape and dtype (`incoming`: randn drawn from the program's seed and the output's index);
    the gradients are torch.autograd.grad(those outputs, leaves, incoming, allow_unused=True);
  * the optimized program is a fresh compilation (its executor has seen no call without grad),
    called CALLS times, each call followed by its backward (the profiling runs, then the
    optimized graph); the last call is compared, and its executed graph
    (torch.jit.last_executed_optimized_graph) says whether a tsfuse:: op ran with grad enabled.

Comparison (`compare_grad`), in this order:
  * errors: when eager raises, in the forward or the backward, the optimized program must raise
    an error of the same class at the same stage, and not raise otherwise;
  * the forward with grad enabled: outputs and inputs after the call as compare.py compares them
    (the program's error bounds apply);
  * which floating outputs require grad: the same outputs on both sides (an output requiring grad
    in the optimized program only is the known divergence requires_grad_without_gradient when
    the gradient through it is zero, a mismatch otherwise);
  * each leaf's gradient: same dtype and shape (strides are not compared: autograd's own layout
    of a gradient is not part of its value), NaN positions equal, infinities equal, and finite
    values within grad_bound.py's bound, per element: 2 N eps T2 + (T2 - T1), the summation-order
    bound of a sum (gen.py's `2 n eps sum|x|`) taken over the absolute values of the gradient's
    terms, plus what the forward's own bounded discrepancies (fused sums, transcendental ops on
    tiles) can change the local derivatives by. Gradients that are bit-identical need no bound.
    Elements whose bound is not finite are compared only for NaN/inf positions (counted:
    `grad_unbounded_elements`). A program using an op grad_bound.py does not know gets no
    bound: its gradients must then be bit-exact (counted: `grad_unknown_op`).
    A NaN of eager's where the optimized value is finite is the known divergence
    nan_from_zero_gradient only where eager's gradient recomputed with 0 * inf = 0 (grad_bound's
    G) is finite and the optimized value is within 2 B of it; any other NaN/inf difference is a
    mismatch.
  * None (no path from the outputs to a leaf) and a gradient of zeros are the same gradient:
    autograd itself returns either for a zero derivative (a comparison's operand gets None, a
    rounded division's `grad * 0` zeros), and a fused op's node has an edge to every operand,
    masks included, where eager's graph may have none. Counted: `grad_none_vs_zeros`. None on
    one side and a non-zero gradient on the other is a mismatch.
When eager's backward fails because an in-place op overwrote a value it saved and the optimized
program's does not (it absorbed the in-place op), eager is rerun with every saved value cloned
when autograd saves it (saved_tensors_hooks: the backward reads the values as they were saved,
through autograd's ordinary formulas), or, where that still fails (the base of a split view was
written), under allow_mutation_on_saved_tensors, and compared as above (known divergence
inplace_saved_tensor). The clone comes first because allow_mutation_on_saved_tensors changes
formulas: prod's backward takes its tensor-subclass path there (products of the other elements,
not result / input), whose NaNs and infinities differ from eager's ordinary run.
Mismatches of gradient runs are triaged as output mismatches are (run.py: the same run with
TSFUSE_DISABLE=1 in a fresh process; identical there = TorchScript's own divergence).
"""
import contextlib
from dataclasses import dataclass, field

import torch

import gen
from compare import MINMAX_RE, MINMAX_REDUCE_RE, compare_results, compare_tensor, error_class
import grad_bound
from zero_ties import ZeroTies, changes_with_ties

GRAD_DTYPES = (torch.float32, torch.float64)
CALLS = 2  # the profiling executor's profiling run, then the optimized graph


@dataclass
class GradResult:
    outputs: tuple = None  # detached
    error: Exception = None
    stage: str = None  # "forward" | "backward" when error is set
    inputs: list = None  # after the call, detached
    needs: list = field(default_factory=list)  # per output: a floating output that requires grad
    grads: list = field(default_factory=list)  # per leaf: the gradient, or None
    extra: list = field(default_factory=list)  # per leaf: the gradient through outputs eager's do not need
    graph: str = ""  # the graph executed by the forward (scripted/traced runs)


def leaves_of(program):
    """Indices of the inputs that require grad in gradient mode."""
    return [i for i, s in enumerate(program.inputs) if isinstance(s, gen.InputSpec) and s.dtype in GRAD_DTYPES]


def incoming(program, k, out):
    """The fixed incoming gradient of output `k` (drawn on the CPU, as inputs are)."""
    g = torch.Generator().manual_seed(program.seed * 1009 + k)
    return torch.randn(tuple(out.shape), generator=g, dtype=torch.float64).to(out.dtype).to(out.device)


def _detach(x):
    return x.detach() if isinstance(x, torch.Tensor) else x


# How a run treats in-place writes to values autograd saved: None (eager's own check fails the
# backward), "clone" (saved values are cloned when saved), "allow" (allow_mutation_on_saved_tensors).
MUTATION_MODES = ("clone", "allow")


def saved_values(mode):
    """The context a run with mutation mode `mode` runs under."""
    if mode == "clone":
        return torch.autograd.graph.saved_tensors_hooks(lambda t: t.clone(), lambda t: t)
    if mode == "allow":
        return torch.autograd.graph.allow_mutation_on_saved_tensors()
    return contextlib.nullcontext()


def run_once(program, fn, needs=None, mutation=None):
    """One gradient run of fn (module docstring). With `needs` (eager's), the gradients are those
    of the outputs eager's run needs; outputs requiring grad here only give `extra`. mutation:
    a MUTATION_MODES entry under which in-place writes to saved values do not fail the backward,
    which then reads the values as they were saved."""
    leaves = leaves_of(program)
    args = program.make_inputs()
    for i in leaves:
        args[i].requires_grad_()
    res = GradResult()
    with saved_values(mutation):
        try:
            out = fn(*args)
        except Exception as exc:  # noqa: BLE001 - any error is a result to compare
            res.error, res.stage, res.inputs = exc, "forward", [_detach(a) for a in args]
            return res
        try:
            res.graph = str(torch.jit.last_executed_optimized_graph())
        except RuntimeError:  # no TorchScript call yet
            pass
        res.needs = [isinstance(o, torch.Tensor) and o.dtype.is_floating_point and o.requires_grad for o in out]
        take = res.needs if needs is None or len(needs) != len(out) else [a and b for a, b in zip(res.needs, needs)]
        ks = [k for k, n in enumerate(take) if n]
        extra = [k for k, n in enumerate(res.needs) if n and not take[k]]
        xs = [args[i] for i in leaves]
        res.grads, res.extra = [None] * len(leaves), [None] * len(leaves)
        try:
            if ks:
                res.grads = list(torch.autograd.grad([out[k] for k in ks], xs, [incoming(program, k, out[k]) for k in ks],
                                                     retain_graph=bool(extra), allow_unused=True))
            if extra:
                res.extra = list(torch.autograd.grad([out[k] for k in extra], xs,
                                                     [incoming(program, k, out[k]) for k in extra], allow_unused=True))
        except Exception as exc:  # noqa: BLE001
            res.error, res.stage = exc, "backward"
    res.outputs = tuple(_detach(o) for o in out)
    res.inputs = [_detach(a) for a in args]
    return res


def run_grad(program, fn, calls=1, needs=None, mutation=None):
    """`calls` gradient runs (fresh inputs each); the last one's result."""
    for _ in range(calls):
        res = run_once(program, fn, needs, mutation)
    return res


def bound_for(program, eager_fn, eager, mutation=None):
    """grad_bound.bounds for eager's gradient run `eager` (a GradResult): (a list per leaf, None)
    or (None, why) when there is no bound (an unknown op, or the rerun failed)."""
    leaves = leaves_of(program)
    args = program.make_inputs()
    for i in leaves:
        args[i].requires_grad_()
    inc = {k: incoming(program, k, eager.outputs[k]) for k, n in enumerate(eager.needs) if n}
    try:
        with saved_values(mutation):
            return grad_bound.bounds(eager_fn, args, leaves, inc), None
    except grad_bound.UnknownOp as exc:
        return None, f"unknown op {exc}"
    except Exception as exc:  # noqa: BLE001 - a bound run that fails gives no bound
        return None, f"bound run failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"


def compare_grad_tensor(e, o, bound, ratios=None):
    """(problem or None, unbounded elements, the known divergences that excused NaNs or infinities) for one
    leaf's gradients; appends the largest |e - o| / bound to `ratios` when values differ within
    the bound. `bound`: grad_bound's (B, G) for the leaf, or None (then bit-exact is required). A
    NaN of eager's where the optimized value is finite is excused (nan_from_zero_gradient) when G,
    eager's gradient with 0 * inf = 0, is finite there and the optimized value is within 2 B of
    it, or is infinite there and the optimized value is that infinity; a NaN of the optimized
    program's where eager's is infinite, always (infinite_gradient_summed_late); an infinity on one side where the other is finite, where the
    terms' absolute sum overflows and their scaled sum does not (sum_overflow_order)."""
    if e.dtype != o.dtype:
        return f"dtype {e.dtype} vs {o.dtype}", 0, set()
    if e.shape != o.shape:
        return f"shape {tuple(e.shape)} vs {tuple(o.shape)}", 0, set()
    if e.numel() == 0:
        return None, 0, set()
    en, on = torch.isnan(e), torch.isnan(o)
    excused = set()
    if not torch.equal(en, on):
        differ = en != on
        bad = differ.nonzero()[0].tolist()
        why = f"NaN mask differs at {bad}: {e[tuple(bad)].item()} vs {o[tuple(bad)].item()}"
        if bound is None:
            return why, 0, set()
        B, G = bound[0].double(), bound[1].double()
        near = (o.double() - G).abs() <= 2 * B
        # (or G's infinity itself: the fused backward skipped the 0 * inf that made eager's NaN)
        ok = en & ~on & ((torch.isfinite(G) & near) | (torch.isinf(G) & (o.double() == G)))
        summed_late = ~en & on & torch.isinf(e)
        if not bool((ok | summed_late | ~differ).all()):
            bad = (differ & ~ok & ~summed_late).nonzero()[0].tolist()
            i = tuple(bad)
            return (f"NaN mask differs at {bad}: {e[i].item()} vs {o[i].item()} (eager's gradient with "
                    f"0 * inf = 0 there: {G[i].item()})"), 0, set()
        excused = {name for name, mask in (("nan_from_zero_gradient", differ & ok),
                                           ("infinite_gradient_summed_late", summed_late)) if bool(mask.any())}
        e = torch.where(differ, o, e)
        en = on
    ec, oc = e.masked_fill(en, 0).double(), o.masked_fill(on, 0).double()
    ei, oi = torch.isinf(ec), torch.isinf(oc)
    if not torch.equal(ei, oi) or not torch.equal(ec[ei], oc[oi]):
        differ = (ei != oi) | (ec != oc) & (ei | oi)
        order = (ei != oi) & bound[2] if bound is not None else torch.zeros_like(differ)
        if not bool((order | ~differ).all()):
            bad = (differ & ~order).nonzero()[0].tolist()
            return f"infinities differ at {bad}: {e[tuple(bad)].item()} vs {o[tuple(bad)].item()}", 0, set()
        excused.add("sum_overflow_order")
        ec, oc = ec.masked_fill(order, 0), oc.masked_fill(order, 0)
        ei, oi = ei & ~order, oi & ~order
    if torch.equal(ec, oc):
        return None, 0, excused
    if bound is None:
        return compare_tensor(e.contiguous(), o.contiguous(), 0.0), 0, set()
    b = bound[0].double()
    fin = torch.isfinite(b) & ~ei
    diff = (ec - oc).abs()
    over = (diff > b) & fin
    if bool(over.any()):
        bad = over.nonzero()[0].tolist()
        i = tuple(bad)
        return (f"at {bad}: {e[i].item()!r} vs {o[i].item()!r}, diff {diff[i].item():.3g} exceeds the bound "
                f"{b[i].item():.3g} (max diff/bound {float((diff[fin] / b[fin].clamp_min(1e-300)).max()):.3g})"), 0, set()
    if ratios is not None and bool(fin.any()):
        ratios.append(float((diff[fin] / b[fin].clamp_min(1e-300)).max()))  # (run.py adds the program)
    return None, int((~fin & ~ei & (diff > 0)).sum()), excused


def _is_zero(g):
    return g is None or not bool((g != 0).any())


def tie_sensitive_gradient(program, j, e, o, needs):
    """Whether leaf j's gradient `o` differs from eager's `e` only where eager's own gradient changes
    with the signed-zero ties of its forward (zero_ties.py): eager's gradient run again with each
    tie decided either way. (A fused op's backward recomputes a min/max whose tie it may decide as
    another of eager's kernels would; rsqrt's derivative then takes the other infinity.)"""
    if not hasattr(program, "eager_fn") or not (MINMAX_REDUCE_RE if e.is_cuda else MINMAX_RE).search(program.source()):
        return False

    def run(decide, peephole):
        mode, fn = ZeroTies(decide, peephole), program.eager_fn()

        def decided(*args):
            with mode:
                return fn(*args)

        res = run_once(program, decided, needs)
        return None if res.error is not None else (res.grads, None, mode.calls)

    def pick(r):
        return r[0][j] if r[0][j] is not None else torch.zeros_like(e)

    return changes_with_ties(run, pick, e, o)


def compare_grad(program, eager, opt, bound_fn, stats=None, known=()):
    """eager/opt: GradResult (opt run with eager's `needs`). bound_fn() -> (bounds per leaf or
    None, why). Returns (problem, known): known names the compare.KNOWN_DIVERGENCES entry whose
    checks passed (everything else matched); `known` lists those already classified (check())."""
    stats = stats if stats is not None else {}
    known = list(known)
    if eager.error is not None or opt.error is not None:
        if eager.error is None:
            return (f"optimized raised {error_class(opt.error)} in the {opt.stage} with grad: "
                    f"{str(opt.error).strip().splitlines()[-1][:300]}"), None
        if opt.error is None:
            return (f"eager raised {type(eager.error).__name__} in the {eager.stage} with grad "
                    f"({str(eager.error).splitlines()[0][:200]}) but optimized did not"), None
        if eager.stage != opt.stage:
            return f"eager raised in the {eager.stage}, optimized in the {opt.stage} (with grad)", None
        if error_class(eager.error) != error_class(opt.error):
            return f"error class {error_class(eager.error)} vs {error_class(opt.error)} in the {eager.stage} with grad", None
        return None, None
    problem, k = compare_results(program, (eager.outputs, None, eager.inputs), (opt.outputs, None, opt.inputs))
    if problem:
        return f"with grad: {problem}", k
    if eager.needs != opt.needs:
        lost = [k for k, (e, o) in enumerate(zip(eager.needs, opt.needs)) if e and not o]
        if lost or len(eager.needs) != len(opt.needs):
            return f"outputs requiring grad {eager.needs} vs {opt.needs}", None
        # Floating outputs that require grad in the optimized program only (a fused op's output
        # requires grad when an operand does, even one that reaches it through a comparison or a
        # creation like ones_like alone): their gradient must be zero.
        if not all(_is_zero(g) for g in opt.extra):
            return (f"outputs requiring grad {eager.needs} vs {opt.needs}, and the optimized-only ones have a "
                    f"non-zero gradient"), None
        known.append("requires_grad_without_gradient")
    bounds = None
    leaves = leaves_of(program)
    for j, (e, o) in enumerate(zip(eager.grads, opt.grads)):
        name = program.params[leaves[j]][0]
        if (e is None) != (o is None):
            stats["grad_none_vs_zeros"] = stats.get("grad_none_vs_zeros", 0) + 1
        if e is None and o is None:
            continue
        none = "eager's" if e is None else "the optimized program's" if o is None else None
        e = e if e is not None else torch.zeros_like(o)
        o = o if o is not None else torch.zeros_like(e)
        if e.dtype == o.dtype and e.shape == o.shape and torch.equal(e.nan_to_num(1.5), o.nan_to_num(1.5)) \
                and torch.equal(torch.isnan(e), torch.isnan(o)):
            continue  # bit-identical (but for the sign of a zero and a NaN's payload): no bound needed
        if bounds is None:
            bounds, why = bound_fn()
            stats["grad_bounds"] = stats.get("grad_bounds", 0) + 1
            if bounds is None:
                stats["grad_unknown_op"] = stats.get("grad_unknown_op", 0) + 1
                stats.setdefault("grad_no_bound_why", []).append(why)
                bounds = [None] * len(leaves)
        why, unbounded, excused = compare_grad_tensor(e, o, bounds[j], stats.setdefault("grad_ratios", []))
        if why and tie_sensitive_gradient(program, j, e, o, eager.needs):
            why, excused = None, set(excused) | {"signed_zero_tie"}
        stats["grad_unbounded_elements"] = stats.get("grad_unbounded_elements", 0) + unbounded
        if why and none:
            why = f"{none} is None (no path from the outputs), compared as zeros: {why}"
        if why:
            return f"gradient of {name}: {why}" + (f" (after {', '.join(known)})" if known else ""), None
        known.extend(sorted(set(excused) - set(known)))
    if known:
        return "; ".join(known), known[0]
    return None, None


# Eager's backward errors of a value written in place after autograd recorded it: one it saved,
# or the base of a view a multi-output op (split, chunk, unbind) returned.
INPLACE_BACKWARD_ERRORS = ("modified by an inplace operation",
                           "is a view and its base or another view of its base has been modified inplace")


def check(program, eager_fn, fn, stats=None):
    """Eager's gradient run of the program vs `fn`'s (CALLS calls): (problem, known, eager, opt),
    eager the run compared."""
    eager = run_grad(program, eager_fn)
    opt = run_grad(program, fn, CALLS, eager.needs)
    known, mutation = [], None
    if (eager.error is not None and eager.stage == "backward" and opt.error is None
            and any(m in str(eager.error) for m in INPLACE_BACKWARD_ERRORS)):
        # Eager's backward reads a value an in-place op overwrote after it was saved; a fused op
        # that absorbed the in-place op saved no such value. Compare with eager's gradient of the
        # values as they were saved (the first mode whose backward runs).
        for mutation in MUTATION_MODES:
            eager = run_grad(program, eager_fn, 1, None, mutation)
            if eager.error is None:
                break
        known.append("inplace_saved_tensor")
    problem, known = compare_grad(program, eager, opt, lambda: bound_for(program, eager_fn, eager, mutation),
                                  stats, known)
    return problem, known, eager, opt


def reproducer(program, lib_path, gen_dir, calls=CALLS):
    """A runnable script: eager's and the scripted program's gradients, side by side."""
    args = ", ".join(s.code() if isinstance(s, gen.InputSpec) else repr(s) for s in program.inputs)
    leaves = leaves_of(program)
    return "\n".join([
        *gen.reproducer_head(program, lib_path, gen_dir),
        "cu = torch.jit.CompilationUnit(src)",
        "scope = {'torch': torch, 'Tensor': torch.Tensor}",
        "exec(src, scope)",
        f"LEAVES = {leaves!r}",
        "def inputs():",
        f"    xs = [{args}]",
        "    for i in LEAVES: xs[i].requires_grad_()",
        "    return xs",
        "def grads(fn):",
        "    xs = inputs(); out = fn(*xs)",
        "    ks = [k for k, o in enumerate(out) if o.dtype.is_floating_point and o.requires_grad]",
        f"    inc = [torch.randn(tuple(out[k].shape), generator=torch.Generator().manual_seed({program.seed} * 1009 + k),",
        "                       dtype=torch.float64).to(out[k].dtype) for k in ks]",
        "    return torch.autograd.grad([out[k] for k in ks], [xs[i] for i in LEAVES], inc, allow_unused=True)",
        f"eager = grads(scope[{program.name!r}])",
        f"for _ in range({calls}): fused = grads(cu.{program.name})",
        "print(torch.jit.last_executed_optimized_graph())",
        "for e, f in zip(eager, fused):",
        "    print(e); print(f)",
        "    if e is not None and f is not None: print('max abs diff', (e.double() - f.double()).abs().max().item())",
    ])
