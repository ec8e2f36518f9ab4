#include "passes/analysis/decompositions.h"

#include "kernels/runtime/product_sums.h"
#include "passes/analysis/op_table.h"
#include "passes/analysis/shape_facts.h"
#include "passes/analysis/symbolic_shapes.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/irparser.h>

#include <cmath>
#include <string>

namespace tsfuse {
namespace {

using torch::jit::Node;

// p is a constant, finite. ATen reports an inf norm over an empty dim with the dim it was given
// (pairwise_distance's is the positive innermost one), so only finite orders decompose.
bool finiteOrder(Node* n, std::string* why) {
  const std::optional<c10::IValue> p = torch::jit::toIValue(n->namedInput("p"));
  if (!p || !(p->isDouble() || p->isInt())) {
    if (why) *why = "p is not a constant";
    return false;
  }
  if (!std::isfinite(p->toScalar().toDouble())) {
    if (why) *why = "p is infinite (ATen's error over an empty dim names the dim it was given)";
    return false;
  }
  return true;
}

bool always(Node*, std::string*) { return true; }

// An operand is an expanded view, which matmul copies whole before its batched product.
bool expandedOperand(Node* n, std::string*) {
  for (torch::jit::Value* v : n->inputs())
    if (isExpand(v->node())) return true;
  return false;  // no candidate: the matmul copies nothing
}

// eye(n[, m], dtype, layout, device, pin_memory) as the comparison of two index vectors: a value
// its elementwise readers fuse (a [n, m] mask over two aranges), never stored. The sizes must be
// non-negative (eye's error for a negative one is not arange's), the layout strided and memory
// unpinned; `given`: the dtype is a constant (else None: the default dtype, as mask * 1.0 has it).
bool eyeApplies(Node* n, std::string* why, bool given) {
  auto say = [why](const char* what) {
    if (why) *why = what;
    return false;
  };
  const bool m = n->inputs().size() == 6;
  if (!symbolicSize(n->input(0)) || (m && !symbolicSize(n->input(1))))
    return say("a size is not known to be >= 0 (eye's error for a negative size is its own)");
  torch::jit::Value* dtype = n->namedInput("dtype");
  if (given != !dtype->mustBeNone()) return false;  // the other entry's
  if (given && !torch::jit::constant_as<int64_t>(dtype)) return say("the dtype is not a constant");
  std::optional<c10::IValue> layout = torch::jit::toIValue(n->namedInput("layout")),
                             pin = torch::jit::toIValue(n->namedInput("pin_memory"));
  if (!layout || !(layout->isNone() || (layout->isInt() && layout->toInt() == 0)))
    return say("its layout is not strided");
  if (!pin || !(pin->isNone() || (pin->isBool() && !pin->toBool()))) return say("it pins memory");
  for (const torch::jit::Use& u : n->output()->uses()) {
    ElementwiseMatch em;
    if (!matchElementwise(u.user, em, nullptr)) return false;  // no candidate: a fill costs less than a compare
  }
  return true;
}
bool eyeDefaultDtype(Node* n, std::string* why) { return eyeApplies(n, why, false); }
bool eyeGivenDtype(Node* n, std::string* why) { return eyeApplies(n, why, true); }

// The graph of eye (columns: eye.m's m, else n) with its dtype None or given.
std::string eyeIR(bool m, bool given) {
  const std::string params = m ? "%n : int, %m : int" : "%n : int";
  const std::string columns = m ? "%m" : "%n";
  return "graph(" + params + (given ? ", %dtype : int" : ", %dtype : NoneType") +
         R"IR(, %layout : int?, %device : Device?, %pin : bool?):
  %long : int = prim::Constant[value=4]()
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %false : bool = prim::Constant[value=0]()
  %unit : float = prim::Constant[value=1.]()
  %r : Tensor = aten::arange(%n, %long, %none, %device, %none)
  %c : Tensor = aten::arange()IR" +
         columns + R"IR(, %long, %none, %device, %none)
  %rows : Tensor = aten::unsqueeze(%r, %one)
  %cols : Tensor = aten::unsqueeze(%c, %zero)
  %mask : Tensor = aten::eq(%rows, %cols)
)IR" +
         (given ? "  %out : Tensor = aten::to(%mask, %dtype, %false, %false, %none)\n"
                : "  %out : Tensor = aten::mul(%mask, %unit)\n") +
         "  return (%out)\n";
}

// triu/tril(x, k) whose readers all fuse (elementwise ops, reductions): the triangle as the
// comparison of two index vectors, where(j - i >= k, x, 0) (tril: <=), the mask fused, never a
// [n, m] copy. Other readers (an output, a matmul) could see the strides, which where() takes
// from x: no candidate.
bool triangleApplies(Node* n, std::string*) {
  for (const torch::jit::Use& u : n->output()->uses()) {
    ElementwiseMatch em;
    ReductionMatch rm;
    if (!matchElementwise(u.user, em, nullptr) && !matchReduction(u.user, rm, nullptr)) return false;
  }
  return true;
}

// The graph of triu (upper) or tril: the op's rank check and error, then x[..., i, j] where
// j - i >= k (tril: <= k), else a zero of x's dtype (zeros_like: the registry's full_like), laid
// out densely as the op's output is. The indices are floats up to 2^24 rows and columns, else
// doubles: exact there (j - i, and its comparison with any k), and computed in the compiled
// kernels' vector lanes, where int64 is interpreted (float: one dtype with a float32 program).
std::string triangleIR(bool upper) {
  const std::string op = upper ? "triu" : "tril";
  return R"IR(
graph(%self : Tensor, %diagonal : int):
  %float : int = prim::Constant[value=6]()
  %double : int = prim::Constant[value=7]()
  %exact : int = prim::Constant[value=16777216]()
  %none : NoneType = prim::Constant()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %rowDim : int = prim::Constant[value=-2]()
  %colDim : int = prim::Constant[value=-1]()
  %message : str = prim::Constant[value=")IR" +
         op + R"IR(: input tensor must have at least 2 dimensions"]()
  %rank : int = aten::dim(%self)
  %low : bool = aten::lt(%rank, %two)
  prim::If(%low)
    block0():
      prim::RaiseException(%message, %none)
      -> ()
    block1():
      -> ()
  %n : int = aten::size(%self, %rowDim)
  %m : int = aten::size(%self, %colDim)
  %device : Device = prim::device(%self)
  %longest : int = prim::max(%n, %m)
  %small : bool = aten::le(%longest, %exact)
  %indices : int = prim::If(%small)
    block0():
      -> (%float)
    block1():
      -> (%double)
  %r : Tensor = aten::arange(%n, %indices, %none, %device, %none)
  %c : Tensor = aten::arange(%m, %indices, %none, %device, %none)
  %rows : Tensor = aten::unsqueeze(%r, %one)
  %cols : Tensor = aten::unsqueeze(%c, %zero)
  %offset : Tensor = aten::sub(%cols, %rows, %one)
  %keep : Tensor = )IR" +
         (upper ? "aten::ge" : "aten::le") + R"IR((%offset, %diagonal)
  %zeros : Tensor = aten::zeros_like(%self, %none, %none, %none, %none, %none)
  %kept : Tensor = aten::where(%keep, %self, %zeros)
  %out : Tensor = aten::contiguous(%kept, %zero)
  return (%out)
)IR";
}

// Distance.cpp's pairwise_distance(x1, x2, p, eps, keepdim): norm(x1 - x2 + eps, p, innermost
// dim, keepdim), norm being linalg_vector_norm; innermost_dim = max(x1.dim(), x2.dim()) - 1, the
// broadcast result's last dim: -1. Lines of a graph body defining %<out> (constants %one, %last
// and %none in scope).
std::string pairwiseDistanceLines(const std::string& x1, const std::string& x2, const std::string& keepdim,
                                  const std::string& out) {
  return "  %" + out + "_diff : Tensor = aten::sub(%" + x1 + ", %" + x2 + ", %one)\n  %" + out +
         "_shifted : Tensor = aten::add(%" + out + "_diff, %eps, %one)\n  %" + out +
         "_dims : int[] = prim::ListConstruct(%last)\n  %" + out + " : Tensor = aten::linalg_vector_norm(%" + out +
         "_shifted, %p, %" + out + "_dims, %" + keepdim + ", %none)\n";
}

std::string pairwiseDistanceIR() {
  return R"IR(
graph(%x1 : Tensor, %x2 : Tensor, %p : float, %eps : float, %keepdim : bool):
  %one : int = prim::Constant[value=1]()
  %last : int = prim::Constant[value=-1]()
  %none : NoneType = prim::Constant()
)IR" + pairwiseDistanceLines("x1", "x2", "keepdim", "out") +
         "  return (%out)\n";
}

// Loss.cpp's triplet_margin_loss: its check that the three have one rank (its message), the
// distances pairwise_distance(anchor, positive / negative, p, eps) (with swap, the negative's the
// minimum of it and the positive-negative one), clamp_min(margin + d_pos - d_neg, 0), then the
// reduction (apply_loss_reduction: none, mean, sum). swap and reduction must be constants, so the
// graph holds no branch a region cannot cross: one entry each.
template <bool Swap, int64_t Reduction>
bool tripletApplies(Node* n, std::string* why) {
  const std::optional<bool> swap = torch::jit::constant_as<bool>(n->namedInput("swap"));
  const std::optional<int64_t> reduction = torch::jit::constant_as<int64_t>(n->namedInput("reduction"));
  if (!swap || !reduction) {
    if (why) *why = "swap or reduction is not a constant";
    return false;
  }
  return *swap == Swap && *reduction == Reduction && finiteOrder(n, why);
}

std::string tripletIR(bool swap, int64_t reduction) {
  std::string ir = R"IR(
graph(%anchor : Tensor, %positive : Tensor, %negative : Tensor, %margin : float, %p : float, %eps : float, %swap : bool, %reduction : int):
  %one : int = prim::Constant[value=1]()
  %zero : int = prim::Constant[value=0]()
  %last : int = prim::Constant[value=-1]()
  %none : NoneType = prim::Constant()
  %false : bool = prim::Constant[value=0]()
  %format : str = prim::Constant[value="The anchor, positive, and negative tensors are expected to have the same number of dimensions, but got: anchor {}D, positive {}D, and negative {}D inputs"]()
  %da : int = aten::dim(%anchor)
  %dp : int = aten::dim(%positive)
  %dn : int = aten::dim(%negative)
  %ap : bool = aten::ne(%da, %dp)
  %pn : bool = aten::ne(%dp, %dn)
  %bad : bool = aten::__or__(%ap, %pn)
  prim::If(%bad)
    block0():
      %message : str = aten::format(%format, %da, %dp, %dn)
      prim::RaiseException(%message, %none)
      -> ()
    block1():
      -> ()
)IR";
  ir += pairwiseDistanceLines("anchor", "positive", "false", "dpos");
  ir += pairwiseDistanceLines("anchor", "negative", "false", swap ? "dan" : "dneg");
  if (swap) {
    ir += pairwiseDistanceLines("positive", "negative", "false", "dswap");
    ir += "  %dneg : Tensor = aten::minimum(%dan, %dswap)\n";
  }
  ir +=
      "  %shifted : Tensor = aten::add(%dpos, %margin, %one)\n"
      "  %gap : Tensor = aten::sub(%shifted, %dneg, %one)\n"
      "  %loss : Tensor = aten::clamp_min(%gap, %zero)\n";
  if (reduction == 0) return ir + "  return (%loss)\n";
  return ir +
         (reduction == 1 ? "  %out : Tensor = aten::mean(%loss, %none)\n"
                         : "  %out : Tensor = aten::sum(%loss, %none)\n") +
         "  return (%out)\n";
}

struct Entry {
  const char* schema;
  bool (*applies)(Node*, std::string*);
  const char* guard;
  const char* ir;
};

// Each unguarded graph is what the op's ATen kernel calls (aten/src/ATen/native), in the same
// order, so the decomposed graph run unfused gives the op's bits.
const Entry kEntries[] = {
    // Distance.cpp: at::norm(self - other, p), whose checks (the dtype's) are the op's.
    {"aten::dist(Tensor self, Tensor other, Scalar p=2) -> Tensor", always, nullptr, R"IR(
graph(%self : Tensor, %other : Tensor, %p : Scalar):
  %one : int = prim::Constant[value=1]()
  %diff : Tensor = aten::sub(%self, %other, %one)
  %out : Tensor = aten::norm(%diff, %p)
  return (%out)
)IR"},
    // A matrix-vector product over an expanded operand (soft k-means' weights @ x[:, None, None]
    // .expand(...)): where matmul copies the expanded matrix, its sum of products over the
    // broadcast reads it in place. The products rounded and summed in tsfuse's order, not the BLAS's: the
    // reductions' tolerance (docs/exactness.md). Guarded (kernels/runtime/product_sums.h).
    {"aten::matmul(Tensor self, Tensor other) -> Tensor", expandedOperand, kProductSumsOp, R"IR(
graph(%self : Tensor, %other : Tensor):
  %column : int = prim::Constant[value=-1]()
  %inner : int = prim::Constant[value=-2]()
  %row : int = prim::Constant[value=-3]()
  %false : bool = prim::Constant[value=0]()
  %none : NoneType = prim::Constant()
  %a : Tensor = aten::unsqueeze(%self, %column)
  %b : Tensor = aten::unsqueeze(%other, %row)
  %products : Tensor = aten::mul(%a, %b)
  %dims : int[] = prim::ListConstruct(%inner)
  %out : Tensor = aten::sum(%products, %dims, %false, %none)
  return (%out)
)IR"},
};

}  // namespace

const std::vector<Decomposition>& decompositions() {
  static const std::vector<Decomposition> table = [] {
    std::vector<Decomposition> out;
    auto add = [&](const char* schema, bool (*applies)(Node*, std::string*), const char* guard, const std::string& ir,
                   bool keepsSelf = false) {
      auto g = std::make_shared<torch::jit::Graph>();
      torch::jit::parseIR(ir, g.get());
      out.push_back({schema, applies, guard, std::move(g), keepsSelf});
    };
    add("aten::pairwise_distance(Tensor x1, Tensor x2, float p=2., float eps=9.9999999999999995e-07, "
        "bool keepdim=False) -> Tensor",
        finiteOrder, nullptr, pairwiseDistanceIR());
    for (const Entry& e : kEntries) add(e.schema, e.applies, e.guard, e.ir);
    const char* eye[] = {
        "aten::eye(SymInt n, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
        "bool? pin_memory=None) -> Tensor",
        "aten::eye.m(SymInt n, SymInt m, *, ScalarType? dtype=None, Layout? layout=None, Device? device=None, "
        "bool? pin_memory=None) -> Tensor"};
    for (bool m : {false, true}) {
      add(eye[m], eyeDefaultDtype, nullptr, eyeIR(m, false));
      add(eye[m], eyeGivenDtype, nullptr, eyeIR(m, true));
    }
    const char* triplet =
        "aten::triplet_margin_loss(Tensor anchor, Tensor positive, Tensor negative, float margin=1., float p=2., "
        "float eps=9.9999999999999995e-07, bool swap=False, int reduction=1) -> Tensor";
    add(triplet, tripletApplies<false, 0>, nullptr, tripletIR(false, 0));
    add(triplet, tripletApplies<false, 1>, nullptr, tripletIR(false, 1));
    add(triplet, tripletApplies<false, 2>, nullptr, tripletIR(false, 2));
    add(triplet, tripletApplies<true, 0>, nullptr, tripletIR(true, 0));
    add(triplet, tripletApplies<true, 1>, nullptr, tripletIR(true, 1));
    add(triplet, tripletApplies<true, 2>, nullptr, tripletIR(true, 2));
    add("aten::triu(Tensor self, int diagonal=0) -> Tensor", triangleApplies, nullptr, triangleIR(true), true);
    add("aten::tril(Tensor self, int diagonal=0) -> Tensor", triangleApplies, nullptr, triangleIR(false), true);
    return out;
  }();
  return table;
}

const Decomposition* decompositionOf(Node* n, std::string* why) {
  bool first = true;
  for (const Decomposition& d : decompositions()) {
    if (!n->matches(d.schema)) continue;
    std::string reason;
    if (d.applies(n, &reason)) return &d;
    if (first && why) *why = reason;
    first = first && reason.empty();
  }
  return nullptr;
}

}  // namespace tsfuse
