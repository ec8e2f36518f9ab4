#include "passes/region.h"

#include <torch/csrc/jit/ir/named_value.h>

#include <algorithm>
#include <unordered_map>

namespace tsfuse {

Region growRegion(Node* root) {
  std::unordered_map<Node*, ElementwiseMatch> in;
  ElementwiseMatch m;
  std::string why;
  TORCH_INTERNAL_ASSERT(matchElementwise(root, m, &why), "growRegion: root is not elementwise");
  in.emplace(root, m);
  Region r;
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
        bool usedOutside = false;
        for (const auto& use : a.tensor->uses()) usedOutside |= !in.count(use.user);
        if (usedOutside) {
          r.boundary.push_back("%" + a.tensor->debugName() + " (" + describeNode(p) +
                               ") is also used outside the region; it stays an operand");
          continue;
        }
        in.emplace(p, std::move(pm));
        changed = true;
      }
    }
  }
  for (auto& kv : in) r.nodes.push_back(kv.first);
  std::sort(r.nodes.begin(), r.nodes.end(), [](Node* a, Node* b) { return a->isBefore(b); });
  std::unordered_map<Node*, int64_t> index;
  std::unordered_map<Value*, int64_t> operandIndex;
  for (Node* n : r.nodes) {
    ElementwiseMatch& nm = in.at(n);
    Instr ins{nm.op, {}};
    for (const MatchedArg& a : nm.args) {
      if (!a.tensor) {
        ins.args.push_back(a.constant);
      } else if (auto idx = index.find(a.tensor->node()); idx != index.end()) {
        ins.args.push_back(Arg::value(idx->second));  // producers precede users: already indexed
      } else {
        auto [it, fresh] = operandIndex.emplace(a.tensor, static_cast<int64_t>(r.operands.size()));
        if (fresh) r.operands.push_back(a.tensor);
        ins.args.push_back(Arg::input(it->second));
      }
    }
    index.emplace(n, static_cast<int64_t>(r.expr.instrs.size()));
    r.expr.instrs.push_back(std::move(ins));
    r.matches.push_back(std::move(nm));
  }
  r.expr.numInputs = static_cast<int>(r.operands.size());
  r.expr.validate();
  return r;
}

std::string regionHazard(const Region& r, AliasDb& aliasDb) {
  for (Value* v : r.operands)
    if (aliasDb.hasWriters(v))
      return "operand %" + v->debugName() + " (or a tensor it may alias) is written by an in-place op";
  return "";
}

Node* rewriteRegion(Rewriter& rw, Region& r, Node* consumer, const char* op,
                    const std::vector<torch::jit::NamedValue>& extra) {
  Graph& g = rw.graph();
  torch::jit::WithInsertPoint guard(consumer);
  Value* list = g.insertNode(g.createList(c10::TensorType::get(), r.operands))->output();
  std::vector<torch::jit::NamedValue> args = {list, r.expr.str()};
  args.insert(args.end(), extra.begin(), extra.end());
  Value* out = g.insert(c10::Symbol::fromQualString(op), args, {}, consumer->sourceRange());
  Node* fused = out->node();
  fused->setSourceRange(consumer->sourceRange());
  consumer->output()->replaceAllUsesWith(out);
  if (consumer != r.root()) rw.erase(consumer);
  for (auto it = r.nodes.rbegin(); it != r.nodes.rend(); ++it) rw.erase(*it);
  return fused;
}

}  // namespace tsfuse
