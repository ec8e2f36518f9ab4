// The recompute policy: which shared values a region computes again rather than reads stored.
#include "passes/regions/recompute.h"

#include "kernels/ir/op_registry.h"
#include "passes/analysis/broadcast_views.h"
#include "passes/analysis/grad_scope.h"
#include "passes/analysis/shape_facts.h"

#include <algorithm>
#include <optional>
#include <unordered_set>

namespace tsfuse {

namespace {

// A duplicated subexpression costs its ops once more per reader: at most this many ops. The
// alternative, storing the broadcast value, costs its whole size in memory (what fusion is for)
// and a write and a read per reader, as much time as a few dozen compiled cheap ops per element.
constexpr size_t kMaxRecomputed = 32;

std::optional<int64_t> knownNumel(Value* v) {  // (TensorType::numel() is 1 for an unknown rank)
  auto t = v->type()->cast<c10::TensorType>();
  auto sizes = t ? t->sizes().concrete_sizes() : std::nullopt;
  if (!sizes) return std::nullopt;
  int64_t n = 1;
  for (int64_t s : *sizes) n *= s;
  return n;
}

// Whether q made a value with a dim its reader may broadcast: an unsqueeze (x[:, None]), sink_views'
// views or an expand (older code's `t.view(n, 1).expand(n, n)`), seen through slices, selects and
// transposes of it (x[:, None, :2], t.expand(n, n).t()).
bool gainsDim(Node* q) {
  while (viewKind(q) == ViewKind::Slice || viewKind(q) == ViewKind::Select || q->kind() == c10::aten::transpose ||
         q->kind() == c10::aten::t)
    q = q->input(0)->node();
  return q->kind() == c10::aten::unsqueeze || broadcastViews(q) || isExpand(q);
}

bool broadcastsFrom(Node* p, std::unordered_set<Node*>& seen) {
  std::optional<int64_t> out = knownNumel(p->output());
  bool known = out.has_value(), larger = true;
  for (Value* v : p->inputs()) {
    if (!v->type()->cast<c10::TensorType>()) continue;
    const std::optional<int64_t> n = knownNumel(v);
    known &= n.has_value();
    larger &= known && *n < *out;
  }
  if (known) return larger;
  for (Value* v : p->inputs()) {
    Node* q = v->node();
    if (gainsDim(q)) return true;
    ElementwiseMatch m;
    if (q->owningBlock() == p->owningBlock() && seen.insert(q).second && matchElementwise(q, m, nullptr) &&
        broadcastsFrom(q, seen))
      return true;
  }
  return false;
}

// Whether an instruction reading r's operands `reads` (operandsRead) reads only views of one
// value: the views sink_views made of one value's leaves (one tsfuse::broadcast_* op) or one
// unsqueezed value. A costly op there is computed once per call at that value's shape
// (kernels/runtime/hoist.h), not once per element of the region's space, so computing it once
// more costs that value's size.
bool narrow(const Region& r, const std::vector<char>& reads) {
  Node* source = nullptr;
  for (size_t i = 0; i < reads.size(); ++i) {
    if (!reads[i]) continue;
    Node* p = r.operands[i]->node();
    Node* views = broadcastViews(p) || p->kind() == c10::aten::unsqueeze ? p : nullptr;
    if (!views || (source && views != source)) return false;
    source = views;
  }
  return source != nullptr;
}

}  // namespace

bool cheapToRecompute(Op op) {
  const OpDef& def = opDef(op);
  return def.rule != LowerRule::Aten && (!def.prim() || primHas(*def.prim(), kJit));
}

bool fusibleReaders(Value* v) {
  for (const auto& use : v->uses()) {
    Node* u = use.user;
    if (isMetadataRead(u)) continue;  // a stand-in serves it once v is fused away (fuse_pairwise)
    if (!sameGradScope(u, v->node())) return false;
    ElementwiseMatch em;
    ReductionMatch rm;
    if (!matchElementwise(u, em, nullptr) && !(use.offset == 0 && matchReduction(u, rm, nullptr))) return false;
  }
  return true;
}

bool broadcasts(Node* p) {
  std::unordered_set<Node*> seen;
  return broadcastsFrom(p, seen);
}

// Whether the nodes of r among `nodes` are few and cheap enough to compute once more.
bool cheaplyRecomputed(const Region& r, const std::vector<Node*>& nodes) {
  if (nodes.size() > kMaxRecomputed) return false;
  const std::vector<std::vector<char>> reads = operandsRead(r.expr);
  for (size_t k = 0; k < r.nodes.size(); ++k)
    if (std::find(nodes.begin(), nodes.end(), r.nodes[k]) != nodes.end() && !cheapToRecompute(r.matches[k].op) &&
        !narrow(r, reads[k]))
      return false;
  return true;
}

bool recomputable(const Region& r) { return cheaplyRecomputed(r, r.nodes) && broadcasts(r.root()); }

}  // namespace tsfuse
