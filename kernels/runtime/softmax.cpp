// tsfuse::softmax (kernels/runtime/softmax.h): softmax and log_softmax along one dim of an elementwise
// expression's value, as three fused calls that each recompute the value, so that neither the
// value nor exp(value - maximum) is ever stored: peak = the output + two reduced tensors.
#include "kernels/runtime/softmax.h"

#include "kernels/backends/last_path.h"
#include "kernels/reference/operand_device.h"
#include "kernels/backends/slabs.h"
#include "kernels/runtime/eager_order.h"
#include "kernels/runtime/fused_call.h"
#include "tsfuse/log.h"

#include <atomic>

namespace tsfuse {
namespace {

// `e` with one more instruction applied to its last value: op(last, extra args...).
Expr extend(Expr e, Op op, std::vector<Arg> more) {
  std::vector<Arg> args = {Arg::value(static_cast<int64_t>(e.instrs.size()) - 1)};
  args.insert(args.end(), more.begin(), more.end());
  e.instrs.push_back(Instr{op, std::move(args)});
  for (const Arg& a : e.instrs.back().args)
    if (a.kind == Arg::Kind::Input) e.numInputs = std::max<int>(e.numInputs, static_cast<int>(a.i) + 1);
  e.validate();
  return e;
}

}  // namespace

namespace {
std::atomic<int64_t>& storedLimit() {
  static std::atomic<int64_t> limit{kSlabElements};
  return limit;
}
}  // namespace

void setSoftmaxStoredLimit(int64_t elements) { storedLimit().store(elements, std::memory_order_relaxed); }
int64_t softmaxStoredLimit() { return storedLimit().load(std::memory_order_relaxed); }

at::Tensor softmaxAten(const Expr& e, at::TensorList operands, int64_t dim, bool log) {
  at::Tensor v = evalAten(e, operands);
  return log ? at::log_softmax(v, dim) : at::softmax(v, dim);
}

at::Tensor runSoftmax(at::TensorList operands, c10::string_view exprText, int64_t dim, bool log,
                      const NativePath& native) {
  std::shared_ptr<const Expr> e = checkedExpr(operands, exprText, nullptr);
  auto eager = [&] {
    setLastPath("aten");
    return softmaxAten(*e, operands, dim, log);
  };
  if (!commonDevice(operands)) return eager();  // raises eager's device error
  auto an = analyzeCached(e, operands, nullptr);
  if (!an) return eager();  // raises eager's error
  const auto rank = static_cast<int64_t>(an->valueShape.size());
  const c10::ScalarType t = an->resultType.back();
  // Out-of-range dims raise there, with softmax's own message.
  if (rank == 0 || dim < -rank || dim >= rank || an->outNumel() == 0) return eager();
  if ((t != at::kFloat && t != at::kDouble) || !broadcastsBeyondOperands(*an, operands)) return eager();
  // A value of at most a slab: storing it is O(tile) scratch, and ATen's one-pass softmax over
  // it beats three fused sweeps.
  if (an->outNumel() <= softmaxStoredLimit()) return eager();

  const int64_t d = dim < 0 ? dim + rank : dim;
  const int64_t n = e->numInputs;
  ReduceSpec along;
  along.dims = std::vector<int64_t>{d};
  along.keepdim = true;
  along.kind = Reduction::Amax;
  std::vector<at::Tensor> ops(operands.begin(), operands.end());
  ops.push_back(runFused(operands, exprText, &along, native));  // $n: the maximum
  const Expr shifted = extend(*e, Op::Sub, {Arg::input(n)});
  const Expr exps = extend(shifted, Op::Exp, {});
  along.kind = Reduction::Sum;
  at::Tensor sum = runFused(ops, exps.str(), &along, native);
  // ATen's CPU softmax: exp(x - max) * (1 / sum); log_softmax: x - (max + log(sum)).
  at::Tensor r;
  if (log) {
    ops.back() = ops.back() + at::log(sum);
    r = runFused(ops, shifted.str(), nullptr, native);  // $n is now max + log(sum)
  } else {
    ops.push_back(at::reciprocal(sum));
    r = runFused(ops, extend(exps, Op::Mul, {Arg::input(n + 1)}).str(), nullptr, native);
  }
  TSFUSE_LOG(kernel, debug, log ? "log_softmax" : "softmax", " along dim ", d, " in three fused calls");
  // ATen's softmax returns a contiguous tensor whatever the value's layout; the fused call's
  // follows its operands', so a permuted one is copied (eager copies its input there too).
  return r.contiguous();
}

}  // namespace tsfuse
