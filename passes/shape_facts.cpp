#include "passes/shape_facts.h"

#include "passes/op_table.h"

#include "kernels/ir/op_registry.h"

#include <algorithm>
#include <vector>

namespace tsfuse {
namespace {

using torch::jit::Node;
using torch::jit::Value;

constexpr int kMaxDepth = 64;  // expression trees of real code are far shallower

bool boolAt(Value* v, int depth) {
  ElementwiseMatch m;
  if (depth > kMaxDepth || !matchElementwise(v->node(), m, nullptr)) return false;
  const OpDef& def = opDef(m.op);
  if (def.has(kCompare) || def.has(kLogical)) return true;
  bool bitwise = m.op == Op::BitwiseAnd || m.op == Op::BitwiseOr || m.op == Op::BitwiseXor || m.op == Op::BitwiseNot;
  // On two bools (or one, for ~) the bitwise ops return bool; a number operand could promote.
  return bitwise && std::all_of(m.args.begin(), m.args.end(),
                                [&](const MatchedArg& a) { return a.tensor && boolAt(a.tensor, depth + 1); });
}

bool leavesWithin(Value* v, const std::vector<Value*>& twins, int depth) {
  if (std::find(twins.begin(), twins.end(), v) != twins.end()) return true;
  ElementwiseMatch m;
  if (depth > kMaxDepth || v->node()->kind() == c10::aten::masked_fill || !matchElementwise(v->node(), m, nullptr))
    return false;
  // The result has its tensor arguments' common layout; numbers add none.
  return std::all_of(m.args.begin(), m.args.end(),
                     [&](const MatchedArg& a) { return !a.tensor || leavesWithin(a.tensor, twins, depth + 1); });
}

// The values known to have x's layout (see provablySameLayout).
std::vector<Value*> layoutTwins(Value* x, int depth) {
  std::vector<Value*> twins{x};
  Node* p = x->node();
  if (isMinMaxDim(p)) {
    twins.push_back(p->output(0) == x ? p->output(1) : p->output(0));
  } else if (isWhereScalarSelf(p) && depth < kMaxDepth) {
    // where(m, c, x0) is laid out as x0 when m is
    std::vector<Value*> inner = layoutTwins(p->input(2), depth + 1);
    if (leavesWithin(p->input(0), inner, 0)) twins.insert(twins.end(), inner.begin(), inner.end());
  }
  return twins;
}

}  // namespace

bool isMinMaxDim(Node* n) {
  if (n->kind() != c10::aten::max && n->kind() != c10::aten::min) return false;
  const c10::FunctionSchema* s = n->maybeSchema();
  return s && s->overload_name() == "dim" && n->outputs().size() == 2;
}

bool isWhereScalarSelf(Node* n) {
  if (n->kind() != c10::aten::where) return false;
  const c10::FunctionSchema* s = n->maybeSchema();
  return s && s->overload_name() == "ScalarSelf";
}

bool provablyBool(Value* v) { return boolAt(v, 0); }

bool provablySameLayout(Value* v, Value* x) { return leavesWithin(v, layoutTwins(x, 0), 0); }

}  // namespace tsfuse
