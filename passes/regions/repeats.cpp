// Operands made by x.repeat(reps) that the fused op reads as broadcasts (see repeats.h).
#include "passes/regions/repeats.h"

#include "passes/analysis/grad_scope.h"
#include "passes/analysis/read_hazards.h"

#include <unordered_set>

namespace tsfuse {

namespace {

// The aten::repeat(self, repeats) node making v, or nullptr.
Node* repeatProducer(Value* v) {
  Node* p = v->node();
  if (p->kind() != c10::aten::repeat) return nullptr;
  const c10::FunctionSchema* s = p->maybeSchema();
  return s && s->overload_name().empty() ? p : nullptr;
}

}  // namespace

std::string planBroadcastRepeats(Region& r, Node* at, AliasDb& aliasDb) {
  std::string note;
  const std::unordered_set<Node*> in(r.nodes.begin(), r.nodes.end());
  for (Value* v : r.operands) {
    Node* p = repeatProducer(v);
    if (!p || !sameGradScope(p, at)) continue;
    bool onlyRegion = true;
    for (const auto& use : v->uses()) onlyRegion &= in.count(use.user) > 0;
    if (!onlyRegion) continue;  // the repeated tensor escapes: it is stored anyway
    if (writerBetween({p->input(0)}, p, at, aliasDb)) continue;
    r.repeats.push_back(p);
    note += "; repeat %" + v->debugName() + " read as a broadcast";
  }
  return note;
}

}  // namespace tsfuse
