#include "kernels/runtime/small_reduction.h"

#include "kernels/backends/cpu/jit/jit.h"

#include <atomic>

namespace tsfuse {
namespace {

std::atomic<int64_t> gUnrolled{0};
std::atomic<bool> gOn{true};

// Same sizes, dtype and strides (those of size-1 dims aside: they never move an element).
bool sameLayout(const Analysis& a, const Analysis& b) {
  if (a.outSizes != b.outSizes || a.outDtype != b.outDtype || a.outStrides.size() != b.outStrides.size()) return false;
  for (size_t d = 0; d < a.outSizes.size(); ++d)
    if (a.outSizes[d] > 1 && a.outStrides[d] != b.outStrides[d]) return false;
  return true;
}

// Instruction `in` of a copy of an expression whose operand i is read as input[i] and whose values
// start at `base`.
Instr remapped(Instr in, const std::vector<Arg>& input, int64_t base) {
  for (Arg& a : in.args) {
    if (a.kind == Arg::Kind::Input)
      a = input[static_cast<size_t>(a.i)];
    else if (a.kind == Arg::Kind::Value)
      a = Arg::value(base + a.i);
  }
  return in;
}

}  // namespace

std::optional<UnrolledReduction> unrollSmallReduction(const Expr& e, at::TensorList operands, const ReduceSpec& r,
                                                      const Analysis& an) {
  if (!gOn.load(std::memory_order_relaxed) || (r.kind != Reduction::Sum && r.kind != Reduction::Prod) || r.dtype ||
      r.withIndices())
    return std::nullopt;
  const c10::ScalarType t = an.reducedDtype;
  if (e.instrs.empty() || an.resultType.empty() || (t != c10::ScalarType::Float && t != c10::ScalarType::Double) ||
      an.resultType.back() != t || an.valueShape != an.shape)
    return std::nullopt;
  const auto rank = static_cast<int64_t>(an.shape.size());
  int64_t dim = -1;
  for (int64_t d : reducedDims(r, rank)) {
    if (an.shape[d] == 1) continue;
    if (dim >= 0) return std::nullopt;  // two dims of extent > 1: eager's order is not a plain fold
    dim = d;
  }
  if (dim < 0 || an.shape[dim] < 2 || an.shape[dim] > kMaxUnrolled) return std::nullopt;  // (0: no values)
  const int64_t count = an.shape[dim];

  // Each operand's slice at index k of the reduced dim (the operand itself where it is the same
  // for every k), each distinct one once; its size-1 dim there dropped unless keepdim.
  UnrolledReduction u;
  std::vector<std::vector<Arg>> input(count, std::vector<Arg>(e.numInputs));
  for (int64_t i = 0; i < e.numInputs; ++i) {
    const at::Tensor& x = operands[i];
    const int64_t d = dim - (rank - x.dim());
    const bool varies = d >= 0 && x.size(d) == count;
    for (int64_t k = 0; k < count; ++k) {
      if (k > 0 && !varies) {
        input[k][i] = input[0][i];
        continue;
      }
      input[k][i] = Arg::input(static_cast<int64_t>(u.operands.size()));
      if (d < 0)
        u.operands.push_back(x);
      else
        u.operands.push_back(r.keepdim ? x.narrow(d, varies ? k : 0, 1) : x.select(d, varies ? k : 0));
    }
  }
  const at::TensorList extras = epilogueOperands(e, operands);
  if (u.operands.size() + extras.size() > static_cast<size_t>(cpu::jit::kMaxLeaves)) return std::nullopt;

  Expr map;
  std::vector<int64_t> result(count);
  for (int64_t k = 0; k < count; ++k) {
    const auto base = static_cast<int64_t>(map.instrs.size());
    for (const Instr& in : e.instrs) map.instrs.push_back(remapped(in, input[k], base));
    result[k] = static_cast<int64_t>(map.instrs.size()) - 1;
  }
  // Folded in index order from the identity: a sum from +0 (two -0.0 sum to +0.0, as eager's),
  // a product from 1 (a product's first step, 1 * x, is x).
  const Op fold = r.kind == Reduction::Sum ? Op::Add : Op::Mul;
  int64_t acc = result[0];
  if (r.kind == Reduction::Sum) {
    map.instrs.push_back({Op::Add, {Arg::value(acc), Arg::floating(0.0)}});
    acc = static_cast<int64_t>(map.instrs.size()) - 1;
  }
  for (int64_t k = 1; k < count; ++k) {
    map.instrs.push_back({fold, {Arg::value(acc), Arg::value(result[k])}});
    acc = static_cast<int64_t>(map.instrs.size()) - 1;
  }
  if (r.epilogue) {
    // The epilogue over the folded value ($0) and its own operands, after the slices.
    std::vector<Arg> epiInput{Arg::value(acc)};
    for (size_t j = 0; j < extras.size(); ++j)
      epiInput.push_back(Arg::input(static_cast<int64_t>(u.operands.size() + j)));
    const auto base = static_cast<int64_t>(map.instrs.size());
    for (const Instr& in : r.epilogue->instrs) map.instrs.push_back(remapped(in, epiInput, base));
  }
  for (const auto& x : extras) u.operands.push_back(x);
  map.numInputs = static_cast<int>(u.operands.size());
  map.validate();
  u.expr = map.str();
  const std::optional<Analysis> mapped = analyzeCached(cachedExpr(u.expr), u.operands, nullptr);
  if (!mapped || !sameLayout(*mapped, an)) return std::nullopt;
  gUnrolled.fetch_add(1, std::memory_order_relaxed);
  return u;
}

int64_t smallReductionsUnrolled() { return gUnrolled.load(std::memory_order_relaxed); }
void setUnrollSmallReductions(bool on) { gOn.store(on, std::memory_order_relaxed); }
bool unrollsSmallReductions() { return gOn.load(std::memory_order_relaxed); }

}  // namespace tsfuse
