#include "kernels/sweep.h"

#include "common/text_cache.h"

#include "kernels/fused_call.h"
#include "tsfuse/log.h"
#include "tsfuse/ops.h"

#include <algorithm>

namespace tsfuse {
namespace {

// The running result of a branch that reduces the slab dim, folded with the next slab's partial
// by the branch's own reduction over the pair, earlier slab first.
at::Tensor fold(const ReduceSpec& r, const at::Tensor& running, const at::Tensor& partial) {
  const at::Tensor pair = at::stack({running, partial});
  switch (r.kind) {
    case Reduction::Amax: return at::amax(pair, 0);
    case Reduction::Amin: return at::amin(pair, 0);
    case Reduction::Any: return at::any(pair, 0);
    case Reduction::All: return at::all(pair, 0);
    default: TORCH_CHECK(false, "tsfuse::reduce_sweep: ", reductionName(r.kind), " does not fold across slabs");
  }
}

}  // namespace

bool foldsAcrossSlabs(const ReduceSpec& r) {
  return r.kind == Reduction::Amax || r.kind == Reduction::Amin || r.kind == Reduction::Any ||
         r.kind == Reduction::All;
}

Sweep Sweep::parse(c10::string_view expr, c10::ArrayRef<std::string> stages) {
  TORCH_CHECK(stages.size() >= 3, "tsfuse::reduce_sweep: a sweep has stage 0 and at least two branches, got ",
              stages.size(), " stages");
  Sweep s;
  s.all = Chain::parse(expr, stages);
  for (size_t j = 1; j < stages.size(); ++j) {
    TORCH_CHECK(!s.all.stages[j].withIndices() && !s.all.squeezeFirst[j] && !s.all.input[j],
                "tsfuse::reduce_sweep: branch ", j, " is max/min with indices, squeezes first or is fused; a sweep's "
                "branches are reductions of stage 0's value with one output each");
    s.branches.push_back(cachedChain(expr, {stages[0], stages[j]}));
  }
  return s;
}

std::vector<at::Tensor> Sweep::branchOperands(at::TensorList operands, size_t j) const {
  std::vector<at::Tensor> out(operands.begin(), operands.begin() + static_cast<int64_t>(all.firstOperand[1]));
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
    out.push_back(applyStage(s.all.stages[j], false, v, s.all.epilogueOperands(operands, j))[0]);
  return out;
}

Outputs runSweep(const Sweep& s, at::TensorList operands, const NativePath& native) {
  const Chain& c = s.all;
  TORCH_CHECK(operands.size() == c.numOperands, "tsfuse::reduce_sweep: expected ", c.numOperands,
              " operands, got ", operands.size());
  for (size_t i = 0; i < operands.size(); ++i)
    TORCH_CHECK(operands[i].defined(), "tsfuse: operand ", i, " is an undefined tensor");
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
    for (size_t j = 0; j < nb; ++j) out.push_back(applyStage(c.stages[j + 1], false, v, c.epilogueOperands(operands, j + 1))[0]);
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

  // The slab dim: the outermost dim of the expression's space, of extent > 1, that stage 0 keeps.
  const ReduceSpec& s0 = c.stages[0];
  const std::vector<int64_t> reduced0 = reducedDims(s0, rank0);
  int64_t d = -1, q = -1;
  for (int64_t k = 0; k < rank0 && d < 0; ++k) {
    q = dimAfterReduction(k, reduced0, s0.keepdim);
    if (an->valueShape[k] > 1 && q >= 0) d = k;
  }
  if (d < 0) return separately();
  const int64_t rankO0 = static_cast<int64_t>(an->outSizes.size());
  std::vector<std::optional<SlabPlan>> plans(nb);  // per branch that keeps the slab dim
  try {
    for (size_t j = 0; j < nb; ++j) {
      const std::vector<int64_t> rj = reducedDims(c.stages[j + 1], rankO0);
      if (std::binary_search(rj.begin(), rj.end(), q)) {
        if (!foldsAcrossSlabs(c.stages[j + 1])) return separately();
        continue;
      }
      plans[j] = s.branches[j]->plan(s.branchOperands(operands, j), *an);
      if (!plans[j] || plans[j]->pos[0] != d) return separately();
    }
  } catch (const c10::Error&) {
    return eager();  // a branch raises: eager's own error
  }

  const at::TensorList main = ops0.slice(0, c.expr->numInputs), epi0 = ops0.slice(c.expr->numInputs);
  const auto slabs = slabRanges(an->valueShape[d], slabStep(an->outNumel(), an->valueShape[d], device));
  Outputs out(nb);
  const char* path = "native";
  ReusedOutput scope;  // the slabs' values in one buffer
  for (size_t i = 0; i < slabs.size(); ++i) {
    const auto [start, len] = slabs[i];
    std::vector<at::Tensor> in0 = narrowOperands(main, rank0, d, start, len);
    for (auto& t : narrowOperands(epi0, rankO0, q, start, len)) in0.push_back(std::move(t));
    const at::Tensor v = runFusedAll(in0, c.expr->str(), &s0, native)[0];
    path = lastPath();
    for (size_t j = 0; j < nb; ++j) {
      const ReduceSpec& b = c.stages[j + 1];
      if (!plans[j]) {  // reduces the slab dim: fold this slab's partial in
        ReduceSpec plain = b;
        plain.epilogue.reset();
        at::Tensor part = applyReductionAll(plain, v)[0];
        out[j] = i == 0 ? part : fold(b, out[j], part);
        continue;
      }
      const SlabPlan& p = *plans[j];
      at::Tensor r = applyStage(b, false, v, narrowOperands(c.epilogueOperands(operands, j + 1), p.ranks[2], p.pos[2], start, len))[0];
      if (i == 0) {
        const std::vector<int64_t> order = strideOrder(r.sizes(), r.strides());
        out[j] = at::empty_strided(p.finalSizes, denseStrides(p.finalSizes, order), r.options());
      }
      out[j].narrow(p.pos.back(), start, len).copy_(r);
    }
  }
  for (size_t j = 0; j < nb; ++j)
    if (!plans[j] && c.stages[j + 1].epilogue)
      out[j] = applyEpilogue(c.stages[j + 1], out[j], c.epilogueOperands(operands, j + 1));
  TSFUSE_LOG(kernel, debug, "reduce_sweep: ", slabs.size(), " slabs along dim ", d, ", ", nb, " branches of ",
             c.expr->str());
  setLastPath(path);
  return out;
}

}  // namespace tsfuse
