#include "kernels/runtime/fused_call.h"

#include "kernels/backends/chunked/chunked.h"
#include "kernels/backends/cpu/native.h"
#include "kernels/backends/last_path.h"
#include "kernels/backends/path_counts.h"
#include "kernels/reference/operand_device.h"
#include "kernels/backends/reused_output.h"
#include "kernels/runtime/bind_numbers.h"
#include "kernels/runtime/donation.h"
#include "kernels/runtime/eager.h"
#include "kernels/runtime/eager_order.h"
#include "kernels/runtime/hoist.h"
#include "kernels/runtime/small_call.h"
#include "kernels/runtime/small_reduction.h"

#include "tsfuse/log.h"
#include "tsfuse/ops.h"

#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace tsfuse {

namespace {

thread_local const void* tlsLastDonated = nullptr;

}  // namespace

void checkOperandsDefined(at::TensorList operands) {
  for (size_t i = 0; i < operands.size(); ++i)
    TORCH_CHECK(operands[i].defined(), "tsfuse: operand ", i, " is an undefined tensor");
}

std::shared_ptr<const Expr> checkedExpr(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce) {
  std::shared_ptr<const Expr> e = cachedExpr(std::string(exprText));
  checkFusedOperandCount(*e, reduce, operands.size());
  checkOperandsDefined(operands);
  return e;
}

at::Tensor runFused(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce,
                    const NativePath& native, at::IntArrayRef donated) {
  return runFusedAll(operands, exprText, reduce, native, donated)[0];
}

const void* lastDonatedMemory() { return tlsLastDonated; }

namespace {

// logsumexp(v, dims, keepdim) in the steps of eager's kernel (ReduceOps.cpp, logsumexp_out_impl):
// m = amax(v, dims, keepdim=True) with +-inf replaced by 0, s = sum(exp(v - m), dims, keepdim),
// log(s) + m. Both passes over v are fused calls of the expression (the max exact in any order;
// the sum native in eager's order where cpu::reducesInEagerOrder holds, else ATen's over the fused
// value): eager's bits, with v itself never stored. For a non-empty float v of rank >= 1 of the
// result's dtype (eager sums exp(v) of an empty one, with no max); the caller applies the epilogue.
Outputs logsumexpInEagerSteps(const Expr& e, at::TensorList operands, const ReduceSpec& reduce,
                              const NativePath& native) {
  const at::TensorList main = mainOperands(e, operands);
  ReduceSpec amax = reduce;
  amax.kind = Reduction::Amax;
  amax.keepdim = true;
  amax.epilogue.reset();
  at::Tensor m = runFusedAll(main, e.str(), &amax, native, {})[0];
  m.masked_fill_(m.abs() == std::numeric_limits<double>::infinity(), 0);
  Expr shifted = e;
  const auto x = static_cast<int64_t>(shifted.instrs.size()) - 1;
  const int64_t mIndex = shifted.numInputs++;
  shifted.instrs.push_back({Op::Sub, {Arg::value(x), Arg::input(mIndex)}});
  shifted.instrs.push_back({Op::Exp, {Arg::value(x + 1)}});
  std::vector<at::Tensor> ops(main.begin(), main.end());
  ops.push_back(m);
  ReduceSpec sum = reduce;
  sum.kind = Reduction::Sum;
  sum.dtype.reset();
  sum.epilogue.reset();
  Outputs out = runFusedAll(ops, shifted.str(), &sum, native, {});
  const at::Tensor max = reduce.keepdim ? m : reduce.dims ? m.squeeze(*reduce.dims) : m.reshape({});
  out[0].log_().add_(max);
  setLastPath("logsumexp");
  return out;
}

// A map run in slabs of rows of its space's dim 0 (hoistSlabRows), each slab's costly narrow
// values hoisted at the slab's shape, written into the output: the values are eager's (computed by
// eager's ops, over the same elements), and the call holds a slab of them.
Outputs mapInHoistedSlabs(const Expr& e, at::TensorList operands, const SlabRows& slabs, const NativePath& native) {
  const std::vector<int64_t>& space = slabs.space;
  const int64_t rank = static_cast<int64_t>(space.size());
  at::Tensor out;
  for (int64_t r0 = 0; r0 < space[0]; r0 += slabs.rows) {
    const int64_t n = std::min(slabs.rows, space[0] - r0);
    std::vector<at::Tensor> slab;
    for (const at::Tensor& t : operands) slab.push_back(t.dim() == rank && t.size(0) > 1 ? t.narrow(0, r0, n) : t);
    std::optional<Hoisted> h = hoistNarrowWork(e, slab, /*wide=*/true);
    const at::Tensor into = out.defined() ? out.narrow(0, r0, n) : at::Tensor();
    const OutputInto in(into);  // (the native path writes the slab in place; another path copies)
    const at::Tensor part = h ? runFusedAll(h->operands, h->expr, nullptr, native, {})[0]
                              : runFusedAll(slab, e.str(), nullptr, native, {})[0];
    if (!out.defined()) {
      out = cpu::allocDenseOutput(space, part.scalar_type());  // (as the native path allocates: huge pages)
      out.narrow(0, r0, n).copy_(part);
    } else if (part.data_ptr() != into.data_ptr()) {
      into.copy_(part);
    }
  }
  setLastPath("hoisted_slabs");
  return {out};
}

}  // namespace

Outputs runFusedAll(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce,
                    const NativePath& native, at::IntArrayRef donated) {
  std::shared_ptr<const Expr> e = checkedExpr(operands, exprText, reduce);
  std::vector<int64_t> mainDonated;  // for a call on the expression's own operands only
  for (int64_t i : donated) {
    TORCH_CHECK(i >= 0 && i < static_cast<int64_t>(operands.size()), "tsfuse: donated operand ", i,
                " out of range for ", operands.size(), " operands");
    if (i < e->numInputs) mainDonated.push_back(i);
  }
  if (!donated.empty()) tlsLastDonated = nullptr;
  if (runsAsAtenOps(*e, operands, reduce)) {
    countPath(PathCount::SmallCalls);
    setLastPath("small_call");
    return evalFused(*e, operands, reduce);
  }
  // The donated operands' places in a call handed on (-1 in `position`: no longer read).
  auto moved = [&](const std::vector<int64_t>& position) {
    std::vector<int64_t> out;
    for (int64_t i : donated)
      if (position[i] >= 0) out.push_back(position[i]);
    return out;
  };
  if (auto bound = bindNumbers(e, reduce, operands)) {
    // Numbers the program reads by value, written in as literals (kernels/runtime/bind_numbers.h).
    const HandedOnOperands held(bound->operands);
    return runFusedAll(bound->operands, bound->text, bound->reduce ? &*bound->reduce : nullptr, native,
                       moved(bound->position));
  }
  if (reduce && reduce->withIndices() && reduce->epilogue) {
    // Max/min with indices, then the epilogue as one fused elementwise call over (values,
    // indices, its operands) whose value takes the indices' place, in their memory where it can
    // (anchor matching's `where(vals < t, -1, idx)`: both outputs of one op, nothing extra held).
    ReduceSpec plain = *reduce;
    plain.epilogue.reset();
    Outputs r = runFusedAll(mainOperands(*e, operands), exprText, &plain, native, mainDonated);
    const char* path = lastPath();
    const bool readsIndices = reduce->epilogue->numInputs >= 2;  // then they are its operand 1, donated
    std::vector<at::Tensor> ops =
        indicesEpilogueOperands(*reduce, r[0], std::move(r[1]), epilogueOperands(*e, operands));
    r[1] = runFusedAll(ops, reduce->epilogue->str(), nullptr, native,
                       readsIndices ? std::vector<int64_t>{1} : std::vector<int64_t>{})[0];
    setLastPath(path);
    return r;
  }
  auto device = commonDevice(operands);
  if (!device) return runEagerAll(*e, operands, reduce);  // raises eager's device error
  // Costly work over fewer dims than the call's space, once at its own shape (kernels/runtime/hoist.h).
  std::optional<Hoisted> hoisted;
  std::optional<SlabRows> slabRows;
  try {
    hoisted = hoistNarrowWork(*e, operands);
    if (!hoisted && !reduce) slabRows = hoistSlabRows(*e, operands);
    if (!hoisted && !slabRows) hoisted = compareIntegersAsFloats(*e, operands, exprText);
  } catch (const c10::Error&) {
    // (operands that do not broadcast, or an op that raises: the call below raises eager's error)
  }
  if (slabRows) return mapInHoistedSlabs(*e, operands, *slabRows, native);
  if (hoisted) {
    const HandedOnOperands held(hoisted->operands);
    return runFusedAll(hoisted->operands, hoisted->expr, reduce, native, moved(hoisted->position));
  }
  auto an = analyzeCached(e, operands, reduce);
  if (!an) return runEagerAll(*e, operands, reduce);  // raises eager's error (or computes)
  if (an->outNumel() == 0) {
    // Nothing to compute, and every intermediate is empty too: eager gives the exact layout.
    Outputs out = runEagerAll(*e, operands, reduce);
    setLastPath("empty");
    return out;
  }
  if (reduce && device->is_cpu() && native)
    if (auto u = unrollSmallReduction(*e, operands, *reduce, *an)) {
      // A sum or product of a few values per output: the map folding them, in eager's order.
      TSFUSE_LOG(kernel, debug, "reduction of ", an->shape, " runs as the map folding its values: ", u->expr);
      const HandedOnOperands held(u->operands);
      return runFusedAll(u->operands, u->expr, nullptr, native);
    }
  // A reduction's epilogue as one fused elementwise call after it, over the reduced value (this
  // call's own, moved into the operand list: nothing else holds it, so the output may take it)
  // and the epilogue's operands, whose donated ones the output may take too: the matmul's result
  // in |x|^2 + |y|^2 - 2 x @ y^T, which the epilogue reads last.
  auto epilogueOver = [&](at::Tensor reduced) {
    std::vector<at::Tensor> ops;
    ops.push_back(std::move(reduced));
    for (const auto& t : epilogueOperands(*e, operands)) ops.push_back(t);
    std::vector<int64_t> given = {0};
    for (int64_t i : donated)
      if (i >= e->numInputs) given.push_back(i - e->numInputs + 1);
    const HandedOnOperands held(ops);
    return runFusedAll(ops, reduce->epilogue->str(), nullptr, native, given)[0];
  };
  if (reduce && reduce->epilogue && !an->epilogueKeepsShape) {
    // The epilogue broadcasts the reduced value to a larger shape (x_norm + y_norm.T - 2 * x @ y.T):
    // the reduction (fused, or ATen's by the do-no-harm rule below, which the inner call applies),
    // then the epilogue as one fused elementwise call over the reduced value and its other
    // operands, so the epilogue's broadcast intermediates are never stored either.
    TSFUSE_LOG(kernel, debug, "epilogue grows the reduced shape; it runs after the reduction");
    ReduceSpec plain = *reduce;
    plain.epilogue.reset();
    Outputs r = runFusedAll(mainOperands(*e, operands), exprText, &plain, native, mainDonated);
    const char* path = lastPath();
    r[0] = epilogueOver(std::move(r[0]));
    setLastPath(path);
    return r;
  }
  // A CPU sum the native path folds in eager's own order needs no detour (cpu::reducesInEagerOrder).
  const bool eagerOrderNative = reduce && native && device->is_cpu() && cpu::reducesInEagerOrder(*reduce, *an);
  if (reduce && keepsEagerOrder() && reduce->roundsByOrder(an->resultType.back()) && !eagerOrderNative &&
      !broadcastsBeyondOperands(*an, mainOperands(*e, operands))) {
    const c10::ScalarType t = an->reducedDtype;
    if (reduce->kind == Reduction::Logsumexp && native && device->is_cpu() && an->resultType.back() == t &&
        (t == at::kFloat || t == at::kDouble) && !an->valueShape.empty() && an->valueNumel() > 0) {
      Outputs out = logsumexpInEagerSteps(*e, operands, *reduce, native);
      if (reduce->epilogue) out[0] = epilogueOver(std::move(out[0]));
      return out;
    }
    // Do no harm: folding in another order than eager changes a float result's bits, which only
    // buys something when the value being reduced is a broadcast intermediate larger than every
    // operand. Here it is not (e.g. `x.pow(2).sum(-1)` over one [N, D] tensor), so ATen reduces
    // the value exactly as the unfused graph did. The value itself comes from the fused
    // elementwise path (eager's bits and layout, its intermediates never stored): the call then
    // holds the operands and the value, where evaluating op by op would also hold the last
    // intermediate while the operand list keeps the operands alive (gp.PeriodicKernel: one
    // [D, N, M] more than the unfused graph, which frees a dead operand after its first reader),
    // unless a donated operand takes the value (then it holds as much as the unfused graph).
    // The epilogue then runs over the reduced value, in its memory.
    at::Tensor value = runFusedAll(mainOperands(*e, operands), exprText, nullptr, native, mainDonated)[0];
    ReduceSpec plain = *reduce;
    plain.epilogue.reset();
    Outputs out = reduceWithAten(*e, operands, plain, std::move(value));
    if (reduce->epilogue) out[0] = epilogueOver(std::move(out[0]));
    setLastPath("aten");
    return out;
  }
  if (!reduce && !donated.empty()) an->donated = takeDonated(operands, donated, *an);
  // Whether the output did take the donated operand (the chunked path's single slab does not).
  auto noteDonation = [&](Outputs out) {
    if (an->donated.defined() && out[0].is_same(an->donated)) {
      tlsLastDonated = out[0].data_ptr();
      TSFUSE_LOG(kernel, debug, "output written over a donated operand: ", exprText);
    }
    return out;
  };
  // Data pointers only where a native path reads them (no other device need have any).
  const IterationPlan plan = IterationPlan::make(*e, operands, reduce, *an, /*bindData=*/bool(native));
  if (native) {
    std::string why;
    Outputs out = native(*e, operands, reduce, *an, plan, &why);
    if (!out.empty()) {
      setLastPath("native");
      return noteDonation(std::move(out));
    }
    TSFUSE_LOG(kernel, debug, "native path declined (", why, "); chunked ATen path for ", exprText);
  }
  setLastPath("chunked");
  return noteDonation(runChunked(*e, operands, reduce, *an, plan));
}

}  // namespace tsfuse
