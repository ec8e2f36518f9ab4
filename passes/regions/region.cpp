// Growing a region and building its expression (see region.h).
#include "passes/regions/region.h"

#include "kernels/ir/op_registry.h"
#include "kernels/runtime/hoist.h"
#include "passes/analysis/broadcast_views.h"
#include "passes/analysis/grad_scope.h"
#include "passes/framework/events.h"
#include "passes/regions/recompute.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace tsfuse {

namespace {

// The region grown from root. A producer whose value others read too joins where every reader is
// fusible and the op cheap (it is then recomputed here, not read stored), unless it is `stored`.
Region grow(Node* root, const std::unordered_set<Node*>& stored) {
  std::unordered_map<Node*, ElementwiseMatch> in;
  ElementwiseMatch m;
  std::string why;
  TORCH_INTERNAL_ASSERT(matchElementwise(root, m, &why), "growRegion: root is not elementwise");
  in.emplace(root, m);
  Region r;
  std::vector<Node*> shared;
  bool changed = true;
  while (changed) {
    changed = false;
    r.boundary.clear();
    std::vector<Node*> members;
    for (auto& kv : in) members.push_back(kv.first);
    // In node order, so the boundary notes read the same on every run (not in address-hash order).
    std::sort(members.begin(), members.end(), [](Node* a, Node* b) { return a->isBefore(b); });
    for (Node* member : members) {
      for (const MatchedArg& a : in.at(member).args) {
        if (!a.tensor) continue;
        Node* p = a.tensor->node();
        if (in.count(p)) continue;
        if (p->owningBlock() != root->owningBlock()) continue;  // defined outside: an operand
        ElementwiseMatch pm;
        if (!matchElementwise(p, pm, &why)) continue;  // views, calls, constants...: an operand
        if (std::string scope = gradScopeBoundary(p, root); !scope.empty()) {
          r.boundary.push_back("%" + a.tensor->debugName() + " (" + describeNode(p) + ") stays an operand: " + scope);
          continue;
        }
        // (a reader of its metadata alone reads a stand-in once it is left unread: fuse_pairwise)
        bool usedOutside = false;
        for (const auto& use : a.tensor->uses()) usedOutside |= !in.count(use.user) && !isMetadataRead(use.user);
        if (usedOutside && !stored.count(p) && cheapToRecompute(pm.op) && fusibleReaders(a.tensor) && broadcasts(p)) {
          shared.push_back(p);
        } else if (usedOutside) {
          r.boundary.push_back("%" + a.tensor->debugName() + " (" + describeNode(p) +
                               ") is also used outside the region; it stays an operand");
          continue;
        }
        in.emplace(p, std::move(pm));
        changed = true;
      }
    }
  }
  std::vector<Node*> nodes;
  for (auto& kv : in) nodes.push_back(kv.first);
  Region grown = regionOf(std::move(nodes));
  grown.boundary.insert(grown.boundary.begin(), r.boundary.begin(), r.boundary.end());
  std::sort(shared.begin(), shared.end(), [](Node* a, Node* b) { return a->isBefore(b); });
  for (Node* p : shared) {
    std::unordered_set<Node*> others;
    for (const auto& use : p->output()->uses())
      if (!in.count(use.user)) others.insert(use.user);
    grown.boundary.push_back("%" + p->output()->debugName() + " (" + describeNode(p) + ") is also read by " +
                             std::to_string(others.size()) +
                             " other fusible op(s): recomputed here rather than stored");
  }
  grown.recomputed = std::move(shared);
  return grown;
}

// The nodes a region leaves in the graph for the other readers of `shared` (nodes it recomputes):
// those and, within the region, what they read.
std::vector<Node*> keptForOthers(const Region& r, const std::vector<Node*>& shared) {
  std::unordered_set<Node*> in(r.nodes.begin(), r.nodes.end()), kept;
  std::vector<Node*> todo = shared;
  while (!todo.empty()) {
    Node* n = todo.back();
    todo.pop_back();
    if (!kept.insert(n).second) continue;
    for (Value* v : n->inputs())
      if (in.count(v->node())) todo.push_back(v->node());
  }
  return {kept.begin(), kept.end()};
}

}  // namespace

// Where recomputing every shared value costs too much, one is read stored instead and the region
// grown again; the others stay recomputed. A value whose recomputation holds a costly op goes
// first, the one with the fewest ops (the costly value itself rather than a cheap op over it,
// which stays recomputed from it); else, all cheap but too many, the one with the most.
Region growRegion(Node* root) {
  std::unordered_set<Node*> stored;
  for (;;) {
    Region r = grow(root, stored);
    if (r.recomputed.empty() || cheaplyRecomputed(r, keptForOthers(r, r.recomputed))) return r;
    Node* chosen = nullptr;
    bool chosenCostly = false;
    size_t chosenOps = 0;
    for (Node* p : r.recomputed) {
      const std::vector<Node*> kept = keptForOthers(r, {p});
      const bool costly = !cheaplyRecomputed(r, kept);
      const bool better = !chosen || (costly && !chosenCostly) ||
                          (costly == chosenCostly && (costly ? kept.size() < chosenOps : kept.size() > chosenOps));
      if (better) {
        chosen = p;
        chosenCostly = costly;
        chosenOps = kept.size();
      }
    }
    stored.insert(chosen);
  }
}

namespace {

// An operand as a note names it: a view sink_views made (a tsfuse::broadcast_* list, unpacked) or
// an unsqueeze by what it views, which is what the source calls it.
std::string operandName(Value* v) {
  Node* p = v->node();
  Value* source = nullptr;
  if (Node* views = broadcastViews(p)) {
    Node* list = views->inputs().empty() ? nullptr : views->input(0)->node();
    const size_t at = std::find(p->outputs().begin(), p->outputs().end(), v) - p->outputs().begin();
    if (list && list->kind() == c10::prim::ListConstruct && at < list->inputs().size()) source = list->input(at);
  } else if (p->kind() == c10::aten::unsqueeze) {
    source = p->input(0);
  }
  return "%" + (source ? source->debugName() : v->debugName());
}

// Costly per-value work (kernels/runtime/hoist.h, costlyPerValue) that reads only some of the region's
// operands: at run time, where those vary over at most a quarter of the call's elements, the CPU
// computes it once at their shape (complete IoU's atan(w / h) per box). The graph cannot show a
// decision made on the call's sizes, so the region's notes say where it may happen.
void noteHoistableWork(Region& r) {
  const size_t n = r.expr.instrs.size(), operands = r.operands.size();
  const std::vector<std::vector<char>> reads = operandsRead(r.expr);
  int noted = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t count = std::count(reads[k].begin(), reads[k].end(), 1);
    if (k + 1 == n || !costlyPerValue(r.expr.instrs[k]) || count == 0 || count == operands || noted == 3) continue;
    std::string names;
    for (size_t i = 0; i < operands; ++i)
      if (reads[k][i]) names += (names.empty() ? "" : ", ") + operandName(r.operands[i]);
    r.boundary.push_back(std::string(opName(r.expr.instrs[k].op)) + " reads " + names +
                         " only: on the CPU it runs once at their shape where they vary over at most a quarter "
                         "of the call's elements (kernels/runtime/hoist.h)");
    ++noted;
  }
}

}  // namespace

std::vector<std::vector<char>> operandsRead(const Expr& e) {
  std::vector<std::vector<char>> reads(e.instrs.size(), std::vector<char>(e.numInputs, 0));
  for (size_t k = 0; k < e.instrs.size(); ++k)
    for (const Arg& a : e.instrs[k].args) {
      if (a.kind == Arg::Kind::Input) reads[k][a.i] = 1;
      if (a.kind == Arg::Kind::Value)
        for (size_t i = 0; i < reads[k].size(); ++i) reads[k][i] |= reads[a.i][i];
    }
  return reads;
}

Region regionOf(std::vector<Node*> nodes) {
  Region r;
  r.nodes = std::move(nodes);
  std::sort(r.nodes.begin(), r.nodes.end(), [](Node* a, Node* b) { return a->isBefore(b); });
  std::unordered_map<Node*, int64_t> index;
  std::unordered_map<Value*, int64_t> operandIndex;
  std::unordered_set<Value*> readByValue;  // numbers already noted in r.boundary
  for (Node* n : r.nodes) {
    ElementwiseMatch nm;
    std::string why;
    TORCH_INTERNAL_ASSERT(matchElementwise(n, nm, &why), "regionOf: ", describeNode(n), " is not elementwise: ", why);
    Instr ins{nm.op, {}};
    for (size_t position = 0; position < nm.args.size(); ++position) {
      const MatchedArg& a = nm.args[position];
      Value* v = a.operand();
      if (a.number && readsNumberByValue(nm.op, position) && readByValue.insert(v).second)
        r.boundary.push_back("%" + v->debugName() + " is read by value (" + opName(nm.op) +
                             "): each call writes it into the program; a new value is lowered again");
      if (!v) {
        ins.args.push_back(a.constant);
      } else if (auto idx = index.find(v->node()); idx != index.end()) {
        ins.args.push_back(Arg::value(idx->second));  // producers precede users: already indexed
      } else {
        auto [it, fresh] = operandIndex.emplace(v, static_cast<int64_t>(r.operands.size()));
        if (fresh) r.operands.push_back(v);
        ins.args.push_back(Arg::input(it->second));
      }
    }
    index.emplace(n, static_cast<int64_t>(r.expr.instrs.size()));
    r.expr.instrs.push_back(std::move(ins));
    r.matches.push_back(std::move(nm));
  }
  r.expr.numInputs = static_cast<int>(r.operands.size());
  r.expr.validate();
  noteHoistableWork(r);
  return r;
}

}  // namespace tsfuse
