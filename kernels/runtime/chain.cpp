// A reduce_chain (kernels/runtime/chain.h): its parse and cache, the ATen reference (evalChain) and
// the fused run slab by slab (runChain), with the fold of a last-dim sum into stage 0 on the CPU.
#include "kernels/runtime/chain.h"

#include "kernels/backends/cpu/native.h"
#include "kernels/backends/cpu/row_sum.h"
#include "kernels/backends/cpu/tile_program.h"
#include "kernels/backends/last_path.h"
#include "kernels/reference/operand_device.h"
#include "kernels/backends/reused_output.h"
#include "kernels/backends/slabs.h"
#include "kernels/runtime/bind_numbers.h"
#include "kernels/runtime/chain_plans.h"
#include "kernels/runtime/chain_text.h"
#include "kernels/runtime/eager_order.h"
#include "kernels/runtime/fused_call.h"

#include "common/text_cache.h"
#include "tsfuse/log.h"
#include "tsfuse/ops.h"

#include <c10/core/Contiguity.h>

#include <atomic>

namespace tsfuse {
namespace {

std::atomic<int64_t> gRowSumsFolded{0};
std::atomic<int64_t> gSlabEpilogues{0};

}  // namespace

Chain Chain::parse(c10::string_view expr, c10::ArrayRef<std::string> stages) {
  Chain c;
  c.plans_ = std::make_shared<ChainPlans>();
  c.expr = cachedExpr(std::string(expr));
  TORCH_CHECK(stages.size() >= 2, "tsfuse::reduce_chain: a chain has at least two stages, got ", stages.size());
  size_t next = static_cast<size_t>(c.expr->numInputs);
  for (size_t k = 0; k < stages.size(); ++k) {
    StageText st = parseStage(stages[k], k);
    ReduceSpec& spec = st.spec;
    std::shared_ptr<const StageInput>& input = st.input;
    c.squeezeFirst.push_back(st.squeeze);
    c.normalize.push_back(st.normalize);
    TORCH_CHECK(k + 1 == stages.size() || !spec.withIndices(), "tsfuse::reduce_chain: stage ", k,
                " is max/min with indices; only the last stage may be");
    c.firstOperand.push_back(next);
    // A fused stage's value (an operand of its expression or of its epilogue) is not the chain's.
    if (input) next += static_cast<size_t>(input->expr->numInputs - 1);
    c.input.push_back(std::move(input));
    if (spec.epilogue) next += static_cast<size_t>(spec.epilogue->numInputs - 1);
    c.stages.push_back(std::move(spec));
  }
  c.numOperands = next;
  return c;
}

std::vector<std::string> Chain::stageTexts() const {
  std::vector<std::string> out;
  for (size_t k = 0; k < stages.size(); ++k)
    out.push_back(normalize[k] ? stageText(*normalize[k]) : stageText(squeezeFirst[k], input[k].get(), stages[k]));
  return out;
}

at::TensorList Chain::inputOperands(at::TensorList operands, size_t k) const {
  return operands.slice(firstOperand[k], input[k] ? input[k]->ownInputs() : 0);
}

at::TensorList Chain::epilogueOperands(at::TensorList operands, size_t k) const {
  const size_t begin = firstOperand[k] + inputOperands(operands, k).size();
  const size_t end = k + 1 < stages.size() ? firstOperand[k + 1] : numOperands;
  return operands.slice(begin, end - begin);
}

std::string stagesKey(c10::string_view expr, c10::ArrayRef<std::string> stages) {
  std::string key(expr);
  for (const auto& s : stages) key += '\n' + s;
  return key;
}

std::shared_ptr<const Chain> cachedChain(c10::string_view expr, c10::ArrayRef<std::string> stages) {
  static TextCache<Chain> cache(4096);
  return cache.get(stagesKey(expr, stages), [&] { return Chain::parse(expr, stages); });
}

namespace {

// An index of the extremum along the last dim (a nearest centre, a hardest example) of a fused
// stage's value, on the CPU: the value computed a block of rows (its dim 0) at a time, about
// chainSlabElements() elements, each block reduced by applyStage's row-extremum pass (two vector
// passes per row, ATen's first-extremum and NaN rule) where the fused reduction would fold value
// and index one element at a time. nullopt: not such a stage, or operands that do not broadcast
// (the fused call then raises eager's error).
std::optional<Outputs> extremumInRowBlocks(const ReduceSpec& r, const std::string& text, at::TensorList ops,
                                           const NativePath& native) {
  const bool extremum = r.withIndices() || r.kind == Reduction::Argmin || r.kind == Reduction::Argmax;
  if (!extremum || !r.dims || *r.dims != std::vector<int64_t>{-1} || r.epilogue || !mainDevice(ops).is_cpu())
    return std::nullopt;
  std::vector<int64_t> shape;
  try {
    for (const auto& t : ops) shape = at::infer_size(shape, t.sizes());
  } catch (const c10::Error&) {
    return std::nullopt;
  }
  const auto R = static_cast<int64_t>(shape.size());
  const int64_t rows = R >= 2 ? shape[0] : 0, perRow = rows > 0 ? c10::multiply_integers(shape) / rows : 0;
  const int64_t block = perRow > 0 ? std::max<int64_t>(1, chainSlabElements() / perRow) : rows;
  if (R < 2 || perRow == 0 || block >= rows)
    return applyStage(r, false, runFusedAll(ops, text, nullptr, native)[0], {});
  Outputs out;
  for (int64_t b0 = 0; b0 < rows; b0 += block) {
    const int64_t b1 = std::min(rows, b0 + block);
    std::vector<at::Tensor> part;
    for (const auto& t : ops) part.push_back(t.dim() == R && t.size(0) == rows ? t.slice(0, b0, b1) : t);
    Outputs o = applyStage(r, false, runFusedAll(part, text, nullptr, native)[0], {});
    if (out.empty())
      for (const auto& t : o) {
        std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
        sizes[0] = rows;
        out.push_back(at::empty(sizes, t.options()));
      }
    for (size_t i = 0; i < o.size(); ++i) out[i].slice(0, b0, b1).copy_(o[i]);
  }
  return out;
}

}  // namespace

Outputs laterStage(const Chain& c, size_t k, const at::Tensor& value, at::TensorList inputs, at::TensorList epilogue,
                   const NativePath* native, const at::Tensor* out) {
  if (const auto& n = c.normalize[k]) return Outputs{n->apply(value, out)};
  const StageInput* in = c.input[k].get();
  if (!in) return applyStage(c.stages[k], c.squeezeFirst[k], value, epilogue);
  const std::vector<at::Tensor> ops = in->operands(value, inputs, epilogue);
  const ReduceSpec& r = c.stages[k];
  if (native && epilogue.empty())
    if (auto out = extremumInRowBlocks(r, in->text, ops, *native)) return std::move(*out);
  return native ? runFusedAll(ops, in->text, &r, *native) : evalFused(*in->expr, ops, &r);
}

Outputs evalChain(const Chain& c, at::TensorList operands) {
  TORCH_CHECK(operands.size() == c.numOperands, "tsfuse::reduce_chain: expected ", c.numOperands, " operands, got ",
              operands.size());
  Outputs out = evalFused(*c.expr, operands.slice(0, c.firstOperand[1]), &c.stages[0]);
  for (size_t k = 1; k < c.stages.size(); ++k)
    out = laterStage(c, k, out[0], c.inputOperands(operands, k), c.epilogueOperands(operands, k), nullptr);
  return out;
}

int64_t chainRowSumsFolded() { return gRowSumsFolded.load(); }

at::Tensor stageZero(const Chain& c, at::TensorList ops0, bool narrowRows, const NativePath& native) {
  const ReduceSpec& s0 = c.stages[0];
  if (!narrowRows || !s0.epilogue || s0.withIndices() || !mainDevice(ops0).is_cpu())
    return runFusedAll(ops0, c.expr->str(), &s0, native)[0];
  ReduceSpec plain = s0;
  plain.epilogue.reset();
  const at::TensorList main = ops0.slice(0, c.expr->numInputs);
  const at::Tensor reduced = runFusedAll(main, c.expr->str(), &plain, native)[0];
  gSlabEpilogues.fetch_add(1, std::memory_order_relaxed);
  return applyEpilogue(s0, reduced, ops0.slice(c.expr->numInputs));
}

int64_t slabEpiloguesAfterStageZero() { return gSlabEpilogues.load(std::memory_order_relaxed); }

bool slicesIntoNarrowRows(int64_t dim, int64_t rank, int64_t step) { return dim == rank - 1 && step < cpu::kTile; }

namespace {

// A later stage's operands: a fused stage's input operands, and the epilogue's.
struct StageOperands {
  std::vector<at::Tensor> input, epilogue;
};

// The chain over one piece of the operands (all of them, or a slab: `narrowRows` as stageZero
// takes it); a last normalizing stage writes into `final` where one is given.
Outputs runStages(const Chain& c, at::TensorList stage0, const std::vector<StageOperands>& later,
                  const NativePath& native, const at::Tensor* final = nullptr, bool narrowRows = false) {
  Outputs out{stageZero(c, stage0, narrowRows, native)};
  const char* path = lastPath();
  for (size_t k = 1; k < c.stages.size(); ++k)
    out = laterStage(c, k, out[0], later[k].input, later[k].epilogue, &native,
                     k + 1 == c.stages.size() ? final : nullptr);
  setLastPath(path);
  return out;
}

// A chain of two stages whose second sums the last dim of the first one's value (a Gaussian
// kernel sum: exp(-|x_i - y_j|^2 / s) * b_j summed over j), on the CPU: each row of that value is
// summed, in eager's order, as soon as the first stage's compiled kernel has finished it, so the
// value is never stored and no slab pays a fused call and an ATen sum.
//
//   before: per slab of rows   %v = stage 0 (fused)       [rows, M] stored
//                              %r = aten::sum(%v, [-1])   [rows]
//   after:  per group of rows  stage 0's tiles -> the thread's row buffer (L1) -> eager's row sum
//
// Eager sums each row of its [N, M] value whole, in the cascade order of kernels/backends/cpu/row_sum.h,
// when the sum has more than one output (ATen then splits only rows among threads) and the value
// is row-major (its last dim contiguous: eager's value is laid out as the analysis says). nullopt
// where any of that, or the compiled path, does not hold (with the reason in the kernel log).
std::optional<Outputs> foldedRowSums(const Chain& c, at::TensorList chainOps0, const Analysis& chainAn,
                                     const NativePath& native) {
  auto no = [&](const std::string& why) -> std::optional<Outputs> {
    TSFUSE_LOG(kernel, debug, "reduce_chain: next stage not folded into stage 0 (", why, ")");
    return std::nullopt;
  };
  const ReduceSpec& next = c.stages.back();
  if (!native || !mainDevice(chainOps0).is_cpu() || c.stages.size() != 2 || c.input[1] || c.normalize[1] ||
      c.squeezeFirst[1] || next.kind != Reduction::Sum || next.epilogue || c.stages[0].withIndices())
    return std::nullopt;
  // Stage 0 runs here, not through runFusedAll: the numbers it reads by value are written in here
  // as runFusedAll writes them (kernels/runtime/bind_numbers.h).
  const std::optional<BoundNumbers> bound = bindNumbers(c.expr, &c.stages[0], chainOps0);
  const std::shared_ptr<const Expr>& expr = bound ? bound->expr : c.expr;
  const ReduceSpec& first = bound ? *bound->reduce : c.stages[0];
  const at::TensorList ops0 = bound ? at::TensorList(bound->operands) : chainOps0;
  const std::optional<Analysis> boundAn = bound ? analyzeCached(expr, ops0, &first) : std::nullopt;
  if (bound && !boundAn) return no("stage 0 with its numbers bound does not analyze (it raises)");
  const Analysis& an = bound ? *boundAn : chainAn;
  const int64_t rank = static_cast<int64_t>(an.outSizes.size());
  if (next.dtype && *next.dtype != c10::ScalarType::Float) return no("the sum changes the dtype");
  if (an.outDtype != c10::ScalarType::Float || rank == 0 || !an.epilogueKeepsShape) return no("not float32 rows");
  const int64_t d = next.dims && next.dims->size() == 1 ? (*next.dims)[0] : rank;
  if (d != -1 && d != rank - 1) return no("the sum is not over the last dim alone");
  if (an.outNumel() / an.outSizes.back() < 2) return no("one row: eager may split its sum among threads");
  if (!c10::_compute_contiguous<int64_t>(an.outSizes, an.outStrides, an.outNumel()))
    return no("the value is not row-major");
  if (keepsEagerOrder() && first.roundsByOrder(an.resultType.back()) &&
      !broadcastsBeyondOperands(an, ops0.slice(0, expr->numInputs)))
    return no("stage 0 keeps ATen's reduction (its value is no larger than an operand)");
  if (!cpu::eagerSumsRowsInCascade()) return no("at::sum does not sum rows as modelled");
  std::vector<int64_t> sizes(an.outSizes.begin(), an.outSizes.end() - 1);
  if (next.keepdim) sizes.push_back(1);
  at::Tensor sums = at::empty(sizes, at::TensorOptions().dtype(at::kFloat));
  const IterationPlan plan = IterationPlan::make(*expr, ops0, &first, an, /*bindData=*/true);
  std::string why;
  if (!cpu::runNativeRowSums(*expr, ops0, first, an, plan, sums, &why)) return no(why);
  ++gRowSumsFolded;
  setLastPath("native");
  return Outputs{sums};
}

// Stage 0's epilogue broadcasts its reduced value to a larger shape (a row norm added to a
// matmul's output, then each row's minimum: PatchCore's nearest neighbour): the next stage, a
// reduction, runs as one fused reduction whose expression is that epilogue, over the reduced value
// and the epilogue's operands, so the larger value is never stored (in one piece it would be,
// whole, between the stages). nullopt: not a chain of that form.
std::optional<Outputs> reduceOverGrowingEpilogue(const Chain& c, at::TensorList operands, const NativePath& native) {
  if (c.stages.size() != 2 || !c.stages[0].epilogue || c.input[1] || c.normalize[1] || c.squeezeFirst[1])
    return std::nullopt;
  ReduceSpec plain = c.stages[0];
  plain.epilogue.reset();
  const auto n0 = static_cast<size_t>(c.expr->numInputs);
  std::vector<at::Tensor> ops{runFusedAll(operands.slice(0, n0), c.expr->str(), &plain, native)[0]};
  for (const auto& t : operands.slice(n0, c.firstOperand[1] - n0)) ops.push_back(t);
  for (const auto& t : c.epilogueOperands(operands, 1)) ops.push_back(t);
  return runFusedAll(ops, c.stages[0].epilogue->str(), &c.stages[1], native);
}

}  // namespace

Outputs runChain(const Chain& c, at::TensorList operands, const NativePath& native) {
  TORCH_CHECK(operands.size() == c.numOperands, "tsfuse::reduce_chain: expected ", c.numOperands, " operands, got ",
              operands.size());
  checkOperandsDefined(operands);
  const at::TensorList ops0 = operands.slice(0, c.firstOperand[1]);
  std::optional<Analysis> an;
  if (commonDevice(operands)) an = analyzeCached(c.expr, ops0, &c.stages[0]);
  if (!an) {
    Outputs out = evalChain(c, operands);  // raises eager's error (or computes)
    setLastPath("eager");
    return out;
  }
  if (!an->epilogueKeepsShape)
    if (auto out = reduceOverGrowingEpilogue(c, operands, native)) return std::move(*out);
  std::vector<StageOperands> later(c.stages.size());
  for (size_t k = 1; k < c.stages.size(); ++k) {
    const at::TensorList in = c.inputOperands(operands, k), e = c.epilogueOperands(operands, k);
    later[k].input.assign(in.begin(), in.end());
    later[k].epilogue.assign(e.begin(), e.end());
  }
  std::optional<SlabPlan> plan;
  if (an->outNumel() > 0) {
    try {
      plan = c.plan(operands, *an);
    } catch (const c10::Error&) {
      Outputs out = evalChain(c, operands);  // a later stage raises: eager's own error
      setLastPath("eager");
      return out;
    }
  }
  if (an->outNumel() > 0)
    if (auto folded = foldedRowSums(c, ops0, *an, native)) return std::move(*folded);
  if (!plan) return runStages(c, ops0, later, native);

  const std::vector<std::pair<int64_t, int64_t>> slabs = slabRanges(plan->extent, plan->step);
  const at::TensorList main = ops0.slice(0, c.expr->numInputs);
  const at::TensorList epi0 = ops0.slice(c.expr->numInputs);
  // A last normalizing stage writes each slab into the output, which is eager's: dense, row-major.
  Outputs finals;
  if (c.normalize.back()) {
    const c10::Device device = mainDevice(operands);
    finals.push_back(device.is_cpu()
                         ? cpu::allocDenseOutput(plan->finalSizes, plan->finalDtype)
                         : at::empty(plan->finalSizes, ops0[0].options().dtype(plan->finalDtype).device(device)));
  }
  auto runSlab = [&](size_t i) {
    ReusedOutput scope;  // stage 0's values in one buffer per thread (later fused stages' outputs are fresh)
    const auto [s, len] = slabs[i];
    std::vector<at::Tensor> in0 = narrowOperands(main, plan->ranks[0], plan->pos[0], s, len);
    for (auto& t : narrowOperands(epi0, plan->ranks[1], plan->pos[1], s, len)) in0.push_back(std::move(t));
    std::vector<StageOperands> slabLater(c.stages.size());
    for (size_t k = 1; k < c.stages.size(); ++k) {
      if (c.input[k]) slabLater[k].input = narrowOperands(later[k].input, plan->inRanks[k], plan->inPos[k], s, len);
      slabLater[k].epilogue = narrowOperands(later[k].epilogue, plan->ranks[k + 1], plan->pos[k + 1], s, len);
    }
    const bool narrow = slicesIntoNarrowRows(plan->pos[1], plan->ranks[1], plan->step);
    if (finals.empty()) return runStages(c, in0, slabLater, native, nullptr, narrow);
    const at::Tensor out = finals[0].narrow(plan->pos.back(), s, len);
    return runStages(c, in0, slabLater, native, &out, narrow);
  };
  // Slabs run on torch's threads, one slab per task (each stage then runs single-threaded inside
  // it: one slab of scratch per thread, and the per-call work of a fused op split too).
  const auto n = static_cast<int64_t>(slabs.size());
  const char* path = nullptr;
  if (!finals.empty()) {
    forSlabs(mainDevice(operands), 0, n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) runSlab(static_cast<size_t>(i));
      if (b == 0) path = lastPath();
    });
  } else {
    // The first slab decides the outputs' layout (the one eager's last op gives a fresh tensor).
    Outputs first = runSlab(0);
    path = lastPath();
    for (const auto& o : first) {
      const std::vector<int64_t> order = strideOrder(o.sizes(), o.strides());
      finals.push_back(at::empty_strided(plan->finalSizes, denseStrides(plan->finalSizes, order), o.options()));
    }
    auto store = [&](size_t i, const Outputs& out) {
      for (size_t j = 0; j < out.size(); ++j)
        finals[j].narrow(plan->pos.back(), slabs[i].first, slabs[i].second).copy_(out[j]);
    };
    store(0, first);
    first.clear();
    forLaterSlabs(mainDevice(operands), n, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) store(static_cast<size_t>(i), runSlab(static_cast<size_t>(i)));
    });
  }
  TSFUSE_LOG(kernel, debug, "reduce_chain: ", slabs.size(), " slabs of ", plan->step, " along dim ", plan->pos[0],
             " of ", c.expr->str());
  setLastPath(path);
  return finals;
}

}  // namespace tsfuse
