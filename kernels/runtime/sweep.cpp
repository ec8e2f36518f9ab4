#include "kernels/runtime/sweep.h"

#include "common/text_cache.h"

#include "kernels/backends/last_path.h"
#include "kernels/reference/operand_device.h"
#include "kernels/backends/reused_output.h"
#include "kernels/backends/slabs.h"
#include "kernels/reference/eval_fused.h"
#include "kernels/runtime/eager_order.h"
#include "kernels/runtime/fused_call.h"
#include "tsfuse/log.h"
#include "tsfuse/ops.h"

#include <algorithm>
#include <mutex>

namespace tsfuse {
namespace {

// A branch that reduces the slab dim: its slab partials folded into its result, in slab order.
// amax/amin/any/all fold with the branch's own reduction over the pair (running, partial): eager's
// values. Float sums and means add the slabs' sums in double, rounded to the result dtype at the
// A run's partials and folds go into buffers it keeps from one slab to the next (the same ATen
// kernels, writing out= views): a slab's few small results would each be an allocation, mapped
// and faulted in afresh where malloc maps small blocks (a fixed mmap threshold).
struct Fold {
  const ReduceSpec* r = nullptr;
  c10::ScalarType dtype = c10::ScalarType::Undefined;  // the result's (from the stand-in check)
  at::Tensor running;
  int64_t count = 0;  // values reduced into each output so far

  void add(const at::Tensor& v) {
    ReduceSpec plain = *r;
    plain.epilogue.reset();
    const bool sum = r->kind == Reduction::Sum || r->kind == Reduction::Mean;
    if (sum && at::isFloatingType(dtype)) {
      // A slab summed as eager sums (ATen's vectorised kernel, in the result dtype), but float16 and
      // bfloat16 in float: their own sum would round each slab's partial. (Summing in double
      // instead costs a converted copy of the slab, far slower.)
      plain.kind = Reduction::Sum;
      plain.dtype = at::isReducedFloatingType(dtype) ? at::kFloat : dtype;
    }
    at::Tensor& buffer = sum ? partial_ : slot_;
    at::Tensor part = buffer.defined() && reduceInto(plain, v, buffer) ? buffer : applyReductionAll(plain, v)[0];
    if (sum && !buffer.defined()) buffer = part;
    absorb(part, sum && part.numel() ? v.numel() / part.numel() : 0);
  }

  // Folds in another run's result (a later run of slabs).
  void merge(const Fold& later) {
    if (later.running.defined()) absorb(later.running, later.count);
  }
  // Empty, sharing no buffer with the fold it was copied from.
  void reset() {
    running = partial_ = pair_ = slot_ = next_ = at::Tensor();
    count = 0;
  }

  at::Tensor result() const {
    if (r->kind == Reduction::Mean) return running.div(static_cast<double>(count)).to(dtype);
    if (r->kind == Reduction::Sum) return running.to(dtype);
    return at::empty_strided(running.sizes(), strides_, running.options()).copy_(running);  // the partials' layout
  }

 private:
  // A slab's partial written into `out` (plain's reduction with out=): false where the reduction
  // has no such form here (the partial is then a new tensor).
  static bool reduceInto(const ReduceSpec& plain, const at::Tensor& v, at::Tensor& out) {
    const at::IntArrayRef dims = plain.dims ? at::IntArrayRef(*plain.dims) : at::IntArrayRef{};
    switch (plain.kind) {
      case Reduction::Sum:
        if (!at::isFloatingType(out.scalar_type())) return false;
        at::sum_out(out, v, plain.dims ? at::OptionalIntArrayRef(dims) : std::nullopt, plain.keepdim, plain.dtype);
        return true;
      case Reduction::Amax:
        at::amax_out(out, v, dims, plain.keepdim);
        return true;
      case Reduction::Amin:
        at::amin_out(out, v, dims, plain.keepdim);
        return true;
      default:
        return false;
    }
  }

  void absorb(const at::Tensor& part, int64_t values) {
    count += values;
    if (r->kind == Reduction::Sum || r->kind == Reduction::Mean) {
      // (a float partial converted to double exactly: the same sum as part.to(kDouble) added)
      if (!running.defined())
        running = at::isFloatingType(part.scalar_type()) ? part.to(at::kDouble, false, true) : part.clone();
      else
        running.add_(part);
      return;
    }
    if (!running.defined()) {
      std::vector<int64_t> shape{2};
      shape.insert(shape.end(), part.sizes().begin(), part.sizes().end());
      pair_ = at::empty(shape, part.options());
      running = pair_.select(0, 0);
      slot_ = pair_.select(0, 1);
      next_ = at::empty_like(running);
      strides_.assign(part.strides().begin(), part.strides().end());
      running.copy_(part);
      return;
    }
    if (!part.is_same(slot_)) slot_.copy_(part);
    switch (r->kind) {
      case Reduction::Amax:
        at::amax_out(next_, pair_, 0);
        break;
      case Reduction::Amin:
        at::amin_out(next_, pair_, 0);
        break;
      case Reduction::Any:
        at::any_out(next_, pair_, 0);
        break;
      case Reduction::All:
        at::all_out(next_, pair_, 0);
        break;
      default:
        TORCH_CHECK(false, "tsfuse::reduce_sweep: ", reductionName(r->kind), " does not fold across slabs");
    }
    running.copy_(next_);
  }

  at::Tensor partial_;            // sums: the buffer a slab's partial is summed into
  at::Tensor pair_, slot_;        // extrema: [running; partial], and its partial's row
  at::Tensor next_;               // extrema: the pair's fold, copied back into running
  std::vector<int64_t> strides_;  // extrema: the first partial's (the result's layout)
};

// Whether stage 0's value holds more elements than every operand (stride-0 dims counted once):
// a broadcast intermediate, which folding saves storing.
bool largerThanOperands(const Analysis& an, at::TensorList operands) {
  return an.outNumel() > largestFootprint(operands);
}

}  // namespace

bool foldsAcrossSlabs(const ReduceSpec& r) {
  return r.kind == Reduction::Amax || r.kind == Reduction::Amin || r.kind == Reduction::Any ||
         r.kind == Reduction::All || r.kind == Reduction::Sum || r.kind == Reduction::Mean;
}

Sweep Sweep::parse(c10::string_view expr, c10::ArrayRef<std::string> stages) {
  TORCH_CHECK(stages.size() >= 2, "tsfuse::reduce_sweep: a sweep has stage 0 and at least one branch, got ",
              stages.size(), " stages");
  Sweep s;
  s.all = Chain::parse(expr, stages);
  for (size_t j = 1; j < stages.size(); ++j) {
    TORCH_CHECK(!s.all.stages[j].withIndices() && !s.all.squeezeFirst[j] && !s.all.normalize[j],
                "tsfuse::reduce_sweep: branch ", j,
                " is max/min with indices, squeezes first or normalizes; a sweep's "
                "branches are reductions (of stage 0's value, or fused over it) with one output each");
    s.branches.push_back(cachedChain(expr, {stages[0], stages[j]}));
  }
  return s;
}

std::vector<at::Tensor> Sweep::branchOperands(at::TensorList operands, size_t j) const {
  std::vector<at::Tensor> out(operands.begin(), operands.begin() + static_cast<int64_t>(all.firstOperand[1]));
  for (const auto& t : all.inputOperands(operands, j + 1)) out.push_back(t);
  for (const auto& t : all.epilogueOperands(operands, j + 1)) out.push_back(t);
  return out;
}

std::shared_ptr<const Sweep> cachedSweep(c10::string_view expr, c10::ArrayRef<std::string> stages) {
  static TextCache<Sweep> cache(1024);
  return cache.get(stagesKey(expr, stages), [&] { return Sweep::parse(expr, stages); });
}

Outputs evalSweep(const Sweep& s, at::TensorList operands) {
  TORCH_CHECK(operands.size() == s.all.numOperands, "tsfuse::reduce_sweep: expected ", s.all.numOperands,
              " operands, got ", operands.size());
  const at::Tensor v = evalFused(*s.all.expr, operands.slice(0, s.all.firstOperand[1]), &s.all.stages[0])[0];
  Outputs out;
  for (size_t j = 1; j < s.all.stages.size(); ++j)
    out.push_back(
        laterStage(s.all, j, v, s.all.inputOperands(operands, j), s.all.epilogueOperands(operands, j), nullptr)[0]);
  return out;
}

Outputs runSweep(const Sweep& s, at::TensorList operands, const NativePath& native) {
  const Chain& c = s.all;
  TORCH_CHECK(operands.size() == c.numOperands, "tsfuse::reduce_sweep: expected ", c.numOperands, " operands, got ",
              operands.size());
  checkOperandsDefined(operands);
  const at::TensorList ops0 = operands.slice(0, c.firstOperand[1]);
  const size_t nb = s.branches.size();
  auto eager = [&] {
    Outputs out = evalSweep(s, operands);  // raises eager's error (or computes)
    setLastPath("eager");
    return out;
  };
  std::optional<Analysis> an;
  if (commonDevice(operands)) an = analyzeCached(c.expr, ops0, &c.stages[0]);
  if (!an) return eager();
  // Stage 0 once, every branch over its whole value.
  auto onePiece = [&] {
    const at::Tensor v = runFusedAll(ops0, c.expr->str(), &c.stages[0], native)[0];
    const char* path = lastPath();
    Outputs out;
    for (size_t j = 0; j < nb; ++j)
      out.push_back(
          laterStage(c, j + 1, v, c.inputOperands(operands, j + 1), c.epilogueOperands(operands, j + 1), &native)[0]);
    setLastPath(path);
    return out;
  };
  // Each branch as its own chain: one sweep each.
  auto separately = [&] {
    Outputs out;
    for (size_t j = 0; j < nb; ++j) out.push_back(runChain(*s.branches[j], s.branchOperands(operands, j), native)[0]);
    return out;
  };
  const int64_t rank0 = static_cast<int64_t>(an->valueShape.size());
  const c10::Device device = mainDevice(ops0);
  if (!worthSlicing(*an, device)) return onePiece();

  const ReduceSpec& s0 = c.stages[0];
  const std::vector<int64_t> reduced0 = reducedDims(s0, rank0);
  const int64_t rankO0 = static_cast<int64_t>(an->outSizes.size());
  std::vector<std::optional<SlabPlan>> plans(nb);  // per branch that keeps the slab dim
  std::vector<Fold> folds(nb);                     // per branch that reduces it
  int64_t d = -1, q = -1;
  try {
    // The slab dim: the first dim in slabDimOrder that stage 0 and every fused branch keep (a
    // fused branch is computed per slab; a plain one folds its slab partials where it reduces it).
    for (int64_t k : slabDimOrder(*an, device)) {
      const int64_t qk = dimAfterReduction(k, reduced0, s0.keepdim);
      if (qk < 0) continue;
      bool fusedKeep = true;
      for (size_t j = 0; j < nb && fusedKeep; ++j)
        if (c.input[j + 1])
          fusedKeep = (plans[j] = s.branches[j]->plan(s.branchOperands(operands, j), *an, k)).has_value();
      if (!fusedKeep) continue;
      d = k;
      q = qk;
      break;
    }
    if (d < 0) return separately();
    for (size_t j = 0; j < nb; ++j) {
      const ReduceSpec& b = c.stages[j + 1];
      const std::vector<int64_t> rj = reducedDims(b, rankO0);  // (a plain branch's: over stage 0's value)
      if (!c.input[j + 1] && std::binary_search(rj.begin(), rj.end(), q)) {
        // A sum or mean another chain could slice (it keeps a dim) runs there, in eager's order.
        const bool sum = b.kind == Reduction::Sum || b.kind == Reduction::Mean;
        if (!foldsAcrossSlabs(b) || (sum && static_cast<int64_t>(rj.size()) < rankO0)) return separately();
        folds[j].r = &b;
        folds[j].dtype = reduceStandIn(b, an->outSizes, an->outDtype).scalar_type();  // eager's errors too
        // A float sum in another order only where it saves storing a value larger than the operands.
        const bool reorders = sum && at::isFloatingType(folds[j].dtype);
        if (reorders && !largerThanOperands(*an, ops0)) return onePiece();
        continue;
      }
      // A fused branch, or a plain one that keeps the slab dim: computed per slab.
      if (!c.input[j + 1]) plans[j] = s.branches[j]->plan(s.branchOperands(operands, j), *an, d);
      if (!plans[j]) return separately();
    }
  } catch (const c10::Error&) {
    return eager();  // a branch raises: eager's own error
  }

  const at::TensorList main = ops0.slice(0, c.expr->numInputs), epi0 = ops0.slice(c.expr->numInputs);
  const int64_t step = slabStep(*an, main, an->valueShape[d], device);
  const auto slabs = slabRanges(an->valueShape[d], step);
  const bool narrow = slicesIntoNarrowRows(q, rankO0, step);
  Outputs out(nb);
  // One slab: stage 0's value, each kept branch written into its output, each folding branch's
  // partial folded into `fs`.
  auto runSlab = [&](size_t i, std::vector<Fold>& fs) {
    ReusedOutput scope;  // the slabs' values in one buffer per thread
    const auto [start, len] = slabs[i];
    std::vector<at::Tensor> in0 = narrowOperands(main, rank0, d, start, len);
    for (auto& t : narrowOperands(epi0, rankO0, q, start, len)) in0.push_back(std::move(t));
    const at::Tensor v = stageZero(c, in0, narrow, native);
    for (size_t j = 0; j < nb; ++j) {
      if (!plans[j]) {  // reduces the slab dim: fold this slab's partial in
        fs[j].add(v);
        continue;
      }
      const SlabPlan& p = *plans[j];
      const std::vector<at::Tensor> inputs =
          c.input[j + 1] ? narrowOperands(c.inputOperands(operands, j + 1), p.inRanks[1], p.inPos[1], start, len)
                         : std::vector<at::Tensor>{};
      at::Tensor r =
          laterStage(c, j + 1, v, inputs,
                     narrowOperands(c.epilogueOperands(operands, j + 1), p.ranks[2], p.pos[2], start, len), &native)[0];
      if (i == 0) {  // the first slab decides the output's layout (the one eager's reduction gives)
        const std::vector<int64_t> order = strideOrder(r.sizes(), r.strides());
        out[j] = at::empty_strided(p.finalSizes, denseStrides(p.finalSizes, order), r.options());
      }
      out[j].narrow(p.pos.back(), start, len).copy_(r);
    }
  };
  runSlab(0, folds);
  const char* path = lastPath();
  // The other slabs on torch's threads (CPU), one slab at a time each (single-threaded inside): each
  // task folds its run of slabs in order, and the runs are folded in in slab order after, so the
  // result depends on the thread count only (as eager's two-pass reductions do).
  std::vector<std::pair<int64_t, std::vector<Fold>>> runs;
  std::mutex mu;
  forLaterSlabs(device, static_cast<int64_t>(slabs.size()), [&](int64_t begin, int64_t end) {
    std::vector<Fold> fs = folds;
    for (Fold& f : fs) f.reset();
    for (int64_t i = begin; i < end; ++i) runSlab(static_cast<size_t>(i), fs);
    std::lock_guard<std::mutex> lock(mu);
    runs.emplace_back(begin, std::move(fs));
  });
  std::sort(runs.begin(), runs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& run : runs)
    for (size_t j = 0; j < nb; ++j)
      if (!plans[j]) folds[j].merge(run.second[j]);
  for (size_t j = 0; j < nb; ++j) {
    if (plans[j]) continue;
    out[j] = folds[j].result();
    if (c.stages[j + 1].epilogue) out[j] = applyEpilogue(c.stages[j + 1], out[j], c.epilogueOperands(operands, j + 1));
  }
  TSFUSE_LOG(kernel, debug, "reduce_sweep: ", slabs.size(), " slabs along dim ", d, ", ", nb, " branches of ",
             c.expr->str());
  setLastPath(path);
  return out;
}

}  // namespace tsfuse
