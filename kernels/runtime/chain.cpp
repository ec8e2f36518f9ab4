#include "kernels/runtime/chain.h"

#include "kernels/runtime/bind_numbers.h"
#include "kernels/runtime/chain_text.h"

#include "common/text_cache.h"

#include "kernels/backends/cpu/native.h"
#include "kernels/backends/cpu/row_extremum.h"
#include "kernels/backends/cpu/row_sum.h"
#include "kernels/runtime/fused_call.h"
#include "tsfuse/log.h"
#include "tsfuse/ops.h"

#include <ATen/Parallel.h>
#include <c10/core/Contiguity.h>
#include <ATen/WrapDimUtils.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

namespace tsfuse {
namespace {

std::atomic<int64_t> gSlabElements{kSlabElements / 2};
std::atomic<int64_t> gRowSumsFolded{0};

// argmin/argmax, and max/min with indices, over one dim of a non-empty extent, faster than ATen's
// kernels and with the same results (the first extremum, the first NaN):
//  * float32 rows contiguous along the dim (a stage-0 slab reduced over its last dim: nearest
//    neighbour): cpu::firstExtremumOfRows, two vector passes per row where ATen's min/max(dim)
//    compare one value at a time (0.14 ms over [1024, 500]);
//  * otherwise argmin/argmax as the indices of min/max(dim): ATen's argmin kernel is not
//    vectorized and min(dim)'s is (0.40 vs 0.14 ms over [1024, 500]). Equal on 25,680 random
//    cases of every real dtype with ties, NaN, -inf and -0.0, both dims, keepdim, multi-threaded
//    sizes. Not for bool (argmin raises where min does not) nor an empty dim (the error names the
//    op); max/min with indices then keep ATen's own call.
std::optional<Outputs> extremaAlongOneDim(const ReduceSpec& r, const at::Tensor& v) {
  const bool arg = r.kind == Reduction::Argmin || r.kind == Reduction::Argmax;
  const bool withValues = r.kind == Reduction::Min || r.kind == Reduction::Max;
  if (!(arg || withValues) || !r.dims || r.dims->size() != 1 || v.dim() == 0) return std::nullopt;
  const int64_t d = at::maybe_wrap_dim((*r.dims)[0], v.dim());
  if (v.size(d) == 0) return std::nullopt;
  const bool isMax = r.kind == Reduction::Argmax || r.kind == Reduction::Max;
  if (v.scalar_type() == at::kFloat && d == v.dim() - 1 && v.is_contiguous() && v.device().is_cpu()) {
    const int64_t n = v.size(d), rows = v.numel() / n;
    at::Tensor idx = at::empty({rows}, v.options().dtype(at::kLong));
    if (cpu::firstExtremumOfRows(v.const_data_ptr<float>(), rows, n, isMax, idx.mutable_data_ptr<int64_t>())) {
      std::vector<int64_t> shape(v.sizes().begin(), v.sizes().end());
      if (r.keepdim) shape[d] = 1;
      else shape.erase(shape.begin() + d);
      Outputs out;
      if (withValues) out.push_back(v.reshape({rows, n}).gather(1, idx.unsqueeze(1)).view(shape));
      out.push_back(idx.view(shape));
      return out;
    }
  }
  const bool real = at::isFloatingType(v.scalar_type()) || at::isIntegralType(v.scalar_type(), /*includeBool=*/false);
  if (!arg || !real) return std::nullopt;
  return Outputs{std::get<1>(isMax ? at::max(v, d, r.keepdim) : at::min(v, d, r.keepdim))};
}

}  // namespace

at::Tensor NormalizeStage::apply(const at::Tensor& value, const at::Tensor* out) const {
  const bool fresh = out == nullptr;
  at::Tensor o = fresh ? at::Tensor() : *out;  // a handle on the output's slab
  switch (kind) {
    case Kind::Softmax: return fresh ? at::softmax(value, dim) : at::softmax_out(o, value, dim);
    case Kind::LogSoftmax: return fresh ? at::log_softmax(value, dim) : at::log_softmax_out(o, value, dim);
    case Kind::DivSum: {
      const at::Tensor sum = at::sum(value, {dim}, /*keepdim=*/true);
      return fresh ? at::div(value, sum) : at::div_out(o, value, sum);
    }
  }
  TORCH_INTERNAL_ASSERT(false, "unknown normalization");
}

Outputs applyStage(const ReduceSpec& spec, bool squeeze, const at::Tensor& value, at::TensorList extras) {
  ReduceSpec plain = spec;
  plain.epilogue.reset();
  const at::Tensor v = squeeze ? value.squeeze() : value;
  Outputs out;
  if (auto extrema = extremaAlongOneDim(plain, v)) out = std::move(*extrema);
  else out = applyReductionAll(plain, v);
  if (spec.epilogue) out[0] = applyEpilogue(spec, out[0], extras);
  return out;
}

namespace {

// A value of `sizes` shrunk to at most two elements per dim (no memory): what a later stage's ATen
// ops raise on, and the dtype and rank they return, are the whole value's.
at::Tensor standIn(std::vector<int64_t> sizes, c10::ScalarType dtype) {
  for (auto& s : sizes) s = std::min<int64_t>(s, 2);
  return at::zeros(sizes, at::TensorOptions().dtype(dtype));
}

}  // namespace

at::Tensor reduceStandIn(const ReduceSpec& r, std::vector<int64_t> sizes, c10::ScalarType dtype) {
  ReduceSpec plain = r;
  plain.epilogue.reset();
  return applyReductionAll(plain, standIn(std::move(sizes), dtype))[0];
}

int64_t dimAfterReduction(int64_t q, const std::vector<int64_t>& reduced, bool keepdim) {
  int64_t before = 0;
  for (int64_t d : reduced) {
    if (d == q) return -1;
    before += d < q;
  }
  return keepdim ? q : q - before;
}

bool worthSlicing(const Analysis& stage0, c10::Device device) {
  return stage0.outNumel() > chainSlabElements(device) && stage0.valueShape == stage0.shape &&
         stage0.epilogueKeepsShape && !stage0.valueShape.empty();
}

// Slab plans of one chain by planKey; steady-state calls of a model reuse theirs.
struct ChainPlans {
  std::mutex mu;
  std::map<std::vector<int64_t>, std::optional<SlabPlan>> plans;
};

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
  return operands.slice(firstOperand[k], input[k] ? static_cast<size_t>(input[k]->expr->numInputs - 1) : 0);
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

// Later stage k over the previous stage's value: ATen's reduction of it, or a fused stage's input
// computed and reduced by `native` (the backend's runFusedAll; null: the reference, evalFused), or
// its normalization (written into `out` where one is given: a slab of the chain's output).
Outputs laterStage(const Chain& c, size_t k, const at::Tensor& value, at::TensorList inputs, at::TensorList epilogue,
                   const NativePath* native, const at::Tensor* out = nullptr) {
  if (const auto& n = c.normalize[k]) return Outputs{n->apply(value, out)};
  const StageInput* in = c.input[k].get();
  if (!in) return applyStage(c.stages[k], c.squeezeFirst[k], value, epilogue);
  const std::vector<at::Tensor> ops = in->operands(value, inputs, epilogue);
  return native ? runFusedAll(ops, in->text, &c.stages[k], *native) : evalFused(*in->expr, ops, &c.stages[k]);
}

}  // namespace

Outputs evalChain(const Chain& c, at::TensorList operands) {
  TORCH_CHECK(operands.size() == c.numOperands, "tsfuse::reduce_chain: expected ", c.numOperands,
              " operands, got ", operands.size());
  Outputs out = evalFused(*c.expr, operands.slice(0, c.firstOperand[1]), &c.stages[0]);
  for (size_t k = 1; k < c.stages.size(); ++k)
    out = laterStage(c, k, out[0], c.inputOperands(operands, k), c.epilogueOperands(operands, k), nullptr);
  return out;
}

int64_t chainRowSumsFolded() { return gRowSumsFolded.load(); }

void setChainSlabElements(int64_t elements) { gSlabElements = std::max<int64_t>(1, elements); }
int64_t chainSlabElements(c10::Device device) { return slabElements(device, gSlabElements.load()); }

void forSlabs(c10::Device device, int64_t begin, int64_t end, const std::function<void(int64_t, int64_t)>& f) {
  if (end <= begin) return;
  if (device.is_cpu()) at::parallel_for(begin, end, 1, f);
  else f(begin, end);
}

void forLaterSlabs(c10::Device device, int64_t n, const std::function<void(int64_t, int64_t)>& f) {
  forSlabs(device, 1, n, f);
}

int64_t slabStep(const Analysis& stage0, at::TensorList main, int64_t extent, c10::Device device) {
  const int64_t budget = chainSlabElements(device), stored = stage0.outNumel();
  const int64_t perIndex = stored / extent;
  const int64_t slabs = (stored + budget - 1) / budget;  // equal slabs: none of a lone row
  const int64_t least = stage0.valueNumel() / extent > largestFootprint(main) ? 1 : 2;
  return std::max<int64_t>(least, std::min<int64_t>((extent + slabs - 1) / slabs, budget / std::max<int64_t>(perIndex, 1)));
}

std::vector<int64_t> slabDimOrder(const Analysis& stage0, c10::Device device) {
  std::vector<int64_t> fit, other;
  for (int64_t d = 0; d < static_cast<int64_t>(stage0.valueShape.size()); ++d) {
    const int64_t extent = stage0.valueShape[d];
    if (extent > 1) (2 * (stage0.outNumel() / extent) <= chainSlabElements(device) ? fit : other).push_back(d);
  }
  fit.insert(fit.end(), other.begin(), other.end());
  return fit;
}

std::vector<std::pair<int64_t, int64_t>> slabRanges(int64_t extent, int64_t step) {
  std::vector<std::pair<int64_t, int64_t>> slabs;
  for (int64_t s = 0, len = 0; s < extent; s += len) {
    len = std::min(step, extent - s);
    if (extent - s - len == 1) ++len;  // no lone last index
    slabs.emplace_back(s, len);
  }
  return slabs;
}

namespace {

// The slab plan of a call, from stage 0's analysis and each later stage's shapes: sizes from the
// reduced dims, dtypes (and eager's dtype errors) from the reduction of a stand-in of at most two
// elements per dim, the epilogue's from its analysis. (Not meta tensors: a reduction's first Meta
// call costs some 35 MiB of resident memory.) nullopt: run the chain in one piece.
std::optional<SlabPlan> planSlabs(const Chain& c, at::TensorList operands, const Analysis& an) {
  const c10::Device device = mainDevice(operands);
  if (!worthSlicing(an, device)) return std::nullopt;
  const int64_t rank0 = static_cast<int64_t>(an.valueShape.size());
  SlabPlan p;
  p.ranks = {rank0};
  std::vector<std::vector<int64_t>> reduced{reducedDims(c.stages[0], rank0)};
  // Where each dim of a stage's input goes when the stage squeezes first (-1: squeezed away).
  std::vector<std::vector<int64_t>> inMap(1);
  for (int64_t d = 0; d < rank0; ++d) inMap[0].push_back(d);
  std::vector<int64_t> sizes = an.outSizes;
  c10::ScalarType dtype = an.outDtype;
  p.inPos.assign(c.stages.size(), -1);
  p.inRanks.assign(c.stages.size(), -1);
  for (size_t k = 1; k < c.stages.size(); ++k) {
    const ReduceSpec& spec = c.stages[k];
    p.ranks.push_back(static_cast<int64_t>(sizes.size()));
    if (const auto& n = c.normalize[k]) {
      // Eager's errors and dtype from a stand-in. A normalization along the last dim keeps the
      // other dims (as a keepdim reduction keeps them) for a slab to cut: ATen gives each row to one
      // thread whole. Along another dim eager's own bits depend on how its threads split the dims
      // after it (softmax over dim 1 of [5, 34, 62]: 43 values differ between 1 and 2 threads), so
      // no slab gives them: every dim counts as reduced, and the chain runs in one piece.
      dtype = n->apply(standIn(sizes, dtype)).scalar_type();
      const int64_t rank = static_cast<int64_t>(sizes.size());
      const int64_t d = at::maybe_wrap_dim(n->dim, rank);
      inMap.emplace_back();
      for (int64_t q = 0; q < rank; ++q) inMap.back().push_back(q);
      reduced.emplace_back();
      for (int64_t q = d == rank - 1 ? d : 0; q < rank; ++q) reduced.back().push_back(q);
      continue;
    }
    if (const StageInput* in = c.input[k].get()) {
      // Where each dim of the value lands in the stage's space (after the unsqueezes, aligned to its
      // trailing dims), and the stage's analysis over the value's sizes and dtype (no memory).
      std::vector<int64_t> where(sizes.size());
      for (size_t q = 0; q < where.size(); ++q) where[q] = static_cast<int64_t>(q);
      int64_t viewRank = static_cast<int64_t>(sizes.size());
      for (int64_t d : in->unsqueeze) {
        const int64_t w = at::maybe_wrap_dim(d, ++viewRank);
        for (auto& q : where) q += q >= w;
      }
      const at::Tensor value = at::zeros({}, at::TensorOptions().dtype(dtype)).expand(sizes);
      auto sa = analyze(*in->expr, in->operands(value, c.inputOperands(operands, k), c.epilogueOperands(operands, k)), &spec);
      if (!sa || sa->valueShape != sa->shape || !sa->epilogueKeepsShape) return std::nullopt;  // one piece
      const int64_t rank = static_cast<int64_t>(sa->shape.size());
      for (auto& q : where) q += rank - viewRank;
      inMap.push_back(std::move(where));
      p.inRanks[k] = rank;
      reduced.push_back(reducedDims(spec, rank));
      sizes = sa->outSizes;
      dtype = sa->outDtype;
      continue;
    }
    inMap.emplace_back();
    std::vector<int64_t> kept;
    for (int64_t s : sizes) {
      const bool gone = c.squeezeFirst[k] && s == 1;
      inMap.back().push_back(gone ? -1 : static_cast<int64_t>(kept.size()));
      if (!gone) kept.push_back(s);
    }
    sizes = std::move(kept);
    const int64_t rank = static_cast<int64_t>(sizes.size());
    reduced.push_back(reducedDims(spec, rank));
    std::vector<int64_t> out;
    for (int64_t d = 0; d < rank; ++d) {
      const bool r = std::binary_search(reduced.back().begin(), reduced.back().end(), d);
      if (!r || spec.keepdim) out.push_back(r ? 1 : sizes[d]);
    }
    const at::Tensor standIn = reduceStandIn(spec, sizes, dtype);
    if (standIn.dim() != static_cast<int64_t>(out.size())) return std::nullopt;
    sizes = std::move(out);
    dtype = standIn.scalar_type();
    if (spec.epilogue) {
      // The reduced value as the epilogue's analysis sees it: its sizes and dtype, no memory.
      std::vector<at::Tensor> ins{at::zeros({}, at::TensorOptions().dtype(dtype)).expand(sizes)};
      for (const auto& t : c.epilogueOperands(operands, k)) ins.push_back(t);
      auto ea = analyze(*spec.epilogue, ins, nullptr);
      if (!ea || ea->outSizes != sizes) return std::nullopt;  // raises, or grows: one piece
      dtype = ea->outDtype;
    }
  }
  p.ranks.push_back(static_cast<int64_t>(sizes.size()));
  p.finalSizes = sizes;
  p.finalDtype = dtype;
  // The first dim of the expression's space in slabDimOrder that every stage keeps.
  for (int64_t d : slabDimOrder(an, device)) {
    std::vector<int64_t> pos{d};
    std::vector<int64_t> inPos(c.stages.size(), -1);
    for (size_t k = 0; k < c.stages.size() && pos.back() >= 0; ++k) {
      const int64_t in = inMap[k][pos.back()];
      if (c.input[k]) inPos[k] = in;
      pos.push_back(in < 0 ? -1 : dimAfterReduction(in, reduced[k], c.stages[k].keepdim || c.normalize[k]));
    }
    if (pos.back() < 0) continue;
    p.pos = std::move(pos);
    p.inPos = std::move(inPos);
    break;
  }
  if (p.pos.empty()) return std::nullopt;
  p.extent = an.valueShape[p.pos[0]];
  p.step = slabStep(an, operands.slice(0, c.expr->numInputs), p.extent, device);
  return p;
}

// What a plan depends on: each operand's dtype, device, sizes and wrapped-number status.
std::vector<int64_t> planKey(at::TensorList operands) {
  std::vector<int64_t> key{chainSlabElements()};
  for (const auto& t : operands) {
    key.push_back(static_cast<int64_t>(t.scalar_type()));
    key.push_back(static_cast<int64_t>(t.device().type()) * 1024 + t.device().index());
    key.push_back(t.unsafeGetTensorImpl()->is_wrapped_number() ? -t.dim() - 1 : t.dim());
    for (int64_t s : t.sizes()) key.push_back(s);
  }
  return key;
}

// A later stage's operands: a fused stage's input operands, and the epilogue's.
struct StageOperands {
  std::vector<at::Tensor> input, epilogue;
};

// The chain over one piece of the operands (all of them, or a slab); a last normalizing stage
// writes into `final` where one is given.
Outputs runStages(const Chain& c, at::TensorList stage0, const std::vector<StageOperands>& later,
                  const NativePath& native, const at::Tensor* final = nullptr) {
  Outputs out = runFusedAll(stage0, c.expr->str(), &c.stages[0], native);
  const char* path = lastPath();
  for (size_t k = 1; k < c.stages.size(); ++k)
    out = laterStage(c, k, out[0], later[k].input, later[k].epilogue, &native, k + 1 == c.stages.size() ? final : nullptr);
  setLastPath(path);
  return out;
}

// A chain of two stages whose second sums the last dim of the first one's value (a Gaussian
// kernel sum: exp(-|x_i - y_j|^2 / s) * b_j summed over j), on the CPU: each row of that value is
// summed, in eager's order, as soon as the first stage's compiled kernel has finished it, so the
// value is never stored and no slab pays a fused call and an ATen sum (1024 x 1024 points, 2
// threads: 1.40 -> 0.80 ms).
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
  if (!c10::_compute_contiguous<int64_t>(an.outSizes, an.outStrides, an.outNumel())) return no("the value is not row-major");
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

}  // namespace

std::optional<SlabPlan> Chain::plan(at::TensorList operands, const Analysis& an) const {
  constexpr size_t kMaxPlans = 64;
  std::vector<int64_t> key = planKey(operands);
  {
    std::lock_guard<std::mutex> lock(plans_->mu);
    auto it = plans_->plans.find(key);
    if (it != plans_->plans.end()) return it->second;
  }
  std::optional<SlabPlan> p = planSlabs(*this, operands, an);  // may raise eager's error: not kept
  std::lock_guard<std::mutex> lock(plans_->mu);
  if (plans_->plans.size() >= kMaxPlans) plans_->plans.clear();
  plans_->plans.emplace(std::move(key), p);
  return p;
}

Outputs runChain(const Chain& c, at::TensorList operands, const NativePath& native) {
  TORCH_CHECK(operands.size() == c.numOperands, "tsfuse::reduce_chain: expected ", c.numOperands,
              " operands, got ", operands.size());
  checkOperandsDefined(operands);
  const at::TensorList ops0 = operands.slice(0, c.firstOperand[1]);
  std::optional<Analysis> an;
  if (commonDevice(operands)) an = analyzeCached(c.expr, ops0, &c.stages[0]);
  if (!an) {
    Outputs out = evalChain(c, operands);  // raises eager's error (or computes)
    setLastPath("eager");
    return out;
  }
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
    finals.push_back(device.is_cpu() ? cpu::allocDenseOutput(plan->finalSizes, plan->finalDtype)
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
    if (finals.empty()) return runStages(c, in0, slabLater, native);
    const at::Tensor out = finals[0].narrow(plan->pos.back(), s, len);
    return runStages(c, in0, slabLater, native, &out);
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
      for (size_t j = 0; j < out.size(); ++j) finals[j].narrow(plan->pos.back(), slabs[i].first, slabs[i].second).copy_(out[j]);
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
