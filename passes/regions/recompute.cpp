// The recompute policy: which shared values a region computes again rather than reads stored.
#include "passes/regions/recompute.h"

#include "kernels/ir/op_registry.h"
#include "passes/analysis/broadcast_views.h"
#include "passes/analysis/grad_scope.h"

#include <algorithm>
#include <optional>

namespace tsfuse {

namespace {

// A duplicated subexpression costs its ops once more per reader: at most this many ops.
constexpr size_t kMaxRecomputed = 8;

}  // namespace

bool cheapToRecompute(Op op) {
  const OpDef& def = opDef(op);
  return def.rule != LowerRule::Aten && (!def.prim() || primHas(*def.prim(), kJit));
}

bool fusibleReaders(Value* v) {
  for (const auto& use : v->uses()) {
    Node* u = use.user;
    if (!sameGradScope(u, v->node())) return false;
    ElementwiseMatch em;
    ReductionMatch rm;
    if (!matchElementwise(u, em, nullptr) && !(use.offset == 0 && matchReduction(u, rm, nullptr))) return false;
  }
  return true;
}

bool broadcasts(Node* p, int depth) {
  auto numel = [](Value* v) -> std::optional<int64_t> {  // (TensorType::numel() is 1 for an unknown rank)
    auto t = v->type()->cast<c10::TensorType>();
    auto sizes = t ? t->sizes().concrete_sizes() : std::nullopt;
    if (!sizes) return std::nullopt;
    int64_t n = 1;
    for (int64_t s : *sizes) n *= s;
    return n;
  };
  std::optional<int64_t> out = numel(p->output());
  bool known = out.has_value(), larger = true;
  for (Value* v : p->inputs()) {
    if (!v->type()->cast<c10::TensorType>()) continue;
    const std::optional<int64_t> n = numel(v);
    known &= n.has_value();
    larger &= known && *n < *out;
  }
  if (known) return larger;
  for (Value* v : p->inputs()) {
    Node* q = v->node();
    if (q->kind() == c10::aten::unsqueeze || broadcastViews(q)) return true;
    ElementwiseMatch m;
    if (depth < 4 && q->owningBlock() == p->owningBlock() && matchElementwise(q, m, nullptr) &&
        broadcasts(q, depth + 1))
      return true;
  }
  return false;
}

// Whether the nodes of r among `nodes` are few and cheap enough to compute once more.
bool cheaplyRecomputed(const Region& r, const std::vector<Node*>& nodes) {
  if (nodes.size() > kMaxRecomputed) return false;
  for (size_t k = 0; k < r.nodes.size(); ++k)
    if (std::find(nodes.begin(), nodes.end(), r.nodes[k]) != nodes.end() && !cheapToRecompute(r.matches[k].op))
      return false;
  return true;
}

bool recomputable(const Region& r) { return cheaplyRecomputed(r, r.nodes) && broadcasts(r.root()); }

}  // namespace tsfuse
