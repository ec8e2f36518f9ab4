// How a chain's call is cut into slabs: the slab budget, dim and size, the stand-ins that give each
// later stage's shapes and dtypes, and Chain::plan's cached SlabPlan (sweeps share these helpers).
#include "kernels/runtime/chain.h"

#include "kernels/reference/operand_device.h"
#include "kernels/backends/slabs.h"
#include "kernels/runtime/chain_plans.h"
#include "kernels/runtime/eager_order.h"

#include <ATen/Parallel.h>
#include <ATen/WrapDimUtils.h>

#include <algorithm>
#include <atomic>
#include <mutex>

namespace tsfuse {
namespace {

std::atomic<int64_t> gSlabElements{kSlabElements / 2};

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

int64_t dimBeforeReduction(int64_t q, const std::vector<int64_t>& reduced, bool keepdim, int64_t rank) {
  if (keepdim) return q;
  for (int64_t d = 0, kept = 0; d < rank; ++d) {
    if (std::binary_search(reduced.begin(), reduced.end(), d)) continue;
    if (kept++ == q) return d;
  }
  return -1;
}

bool worthSlicing(const Analysis& stage0, c10::Device device) {
  return stage0.outNumel() > chainSlabElements(device) && stage0.valueShape == stage0.shape &&
         stage0.epilogueKeepsShape && !stage0.valueShape.empty();
}

void setChainSlabElements(int64_t elements) { gSlabElements = std::max<int64_t>(1, elements); }
int64_t chainSlabElements(c10::Device device) { return slabElements(device, gSlabElements.load()); }

void forSlabs(c10::Device device, int64_t begin, int64_t end, const std::function<void(int64_t, int64_t)>& f) {
  if (end <= begin) return;
  if (device.is_cpu())
    at::parallel_for(begin, end, 1, f);
  else
    f(begin, end);
}

void forLaterSlabs(c10::Device device, int64_t n, const std::function<void(int64_t, int64_t)>& f) {
  forSlabs(device, 1, n, f);
}

int64_t slabStep(const Analysis& stage0, at::TensorList main, int64_t extent, c10::Device device) {
  const int64_t budget = chainSlabElements(device), stored = stage0.outNumel();
  const int64_t perIndex = stored / extent;
  const int64_t slabs = (stored + budget - 1) / budget;  // equal slabs: none of a lone row
  const int64_t least = stage0.valueNumel() / extent > largestFootprint(main) ? 1 : 2;
  return std::max<int64_t>(least,
                           std::min<int64_t>((extent + slabs - 1) / slabs, budget / std::max<int64_t>(perIndex, 1)));
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
// call grows resident memory for good.) nullopt: run the chain in one piece.
std::optional<SlabPlan> planSlabs(const Chain& c, at::TensorList operands, const Analysis& an, int64_t dim) {
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
      // after it, so no slab gives them: every dim counts as reduced, and the chain runs in one piece.
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
      auto sa =
          analyze(*in->expr, in->operands(value, c.inputOperands(operands, k), c.epilogueOperands(operands, k)), &spec);
      if (!sa || sa->valueShape != sa->shape || !sa->epilogueKeepsShape) return std::nullopt;  // one piece
      const int64_t rank = static_cast<int64_t>(sa->shape.size());
      reduced.push_back(reducedDims(spec, rank));
      if (!in->inEpilogue()) {
        for (auto& q : where) q += rank - viewRank;
      } else {
        // An epilogue operand: aligned to the trailing dims of the stage's reduced value, each of
        // its dims the expression's dim that the reduction keeps there.
        const int64_t outRank = static_cast<int64_t>(sa->outSizes.size());
        if (viewRank > outRank) return std::nullopt;
        for (auto& q : where) q = dimBeforeReduction(q + outRank - viewRank, reduced.back(), spec.keepdim, rank);
      }
      inMap.push_back(std::move(where));
      p.inRanks[k] = rank;
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
  // The first dim of the expression's space in slabDimOrder that every stage keeps (`dim` alone
  // where one is given).
  for (int64_t d : slabDimOrder(an, device)) {
    if (dim >= 0 && d != dim) continue;
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

}  // namespace

std::optional<SlabPlan> Chain::plan(at::TensorList operands, const Analysis& an, int64_t dim) const {
  constexpr size_t kMaxPlans = 64;
  std::vector<int64_t> key = planKey(operands);
  key.push_back(dim);
  {
    std::lock_guard<std::mutex> lock(plans_->mu);
    auto it = plans_->plans.find(key);
    if (it != plans_->plans.end()) return it->second;
  }
  std::optional<SlabPlan> p = planSlabs(*this, operands, an, dim);  // may raise eager's error: not kept
  std::lock_guard<std::mutex> lock(plans_->mu);
  if (plans_->plans.size() >= kMaxPlans) plans_->plans.clear();
  plans_->plans.emplace(std::move(key), p);
  return p;
}

}  // namespace tsfuse
