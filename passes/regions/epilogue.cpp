// Planning a reduction's epilogue (see epilogue.h).
#include "passes/regions/epilogue.h"

#include "passes/analysis/grad_scope.h"
#include "passes/analysis/shape_facts.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace tsfuse {

namespace {

// Values of `nodes` (and `reduced`) read by a node outside them; with standIn, readers of
// `reduced`'s metadata alone do not count.
size_t openValues(Value* reduced, const std::vector<Node*>& nodes, const std::unordered_set<Node*>& set, Value** open,
                  bool standIn) {
  size_t count = 0;
  auto check = [&](Value* v) {
    for (const auto& u : v->uses())
      if (!set.count(u.user) && !(standIn && v == reduced && isMetadataRead(u.user))) {
        *open = v;
        ++count;
        return;
      }
  };
  check(reduced);
  for (Node* n : nodes) check(n->output());
  return count;
}

// An operand of the epilogue made by an elementwise op that only the epilogue reads (the union's
// area1[:, None] + area2 - inter, where the sum of areas is [N, M]) joins it, and so on up: left
// outside, it would be stored at the epilogue's size instead of fusing with the ops that read it.
// Keeps `nodes` (with their matches) in block order.
template <typename Refuse>
void absorbPrivateProducers(Value* reduced, std::vector<Node*>& nodes, std::vector<ElementwiseMatch>& matches,
                            Refuse refuse) {
  if (nodes.empty()) return;
  std::unordered_set<Node*> set(nodes.begin(), nodes.end());
  std::vector<std::pair<Node*, ElementwiseMatch>> all;
  for (size_t k = 0; k < nodes.size(); ++k) all.emplace_back(nodes[k], std::move(matches[k]));
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t k = 0; k < all.size() && !grew; ++k) {
      for (const MatchedArg& a : all[k].second.args) {
        if (!a.tensor || a.tensor == reduced) continue;
        Node* p = a.tensor->node();
        if (set.count(p) || !sameGradScope(p, reduced->node()) || p->outputs().size() != 1) continue;
        bool privately = true;
        for (const auto& u : a.tensor->uses()) privately &= set.count(u.user) > 0;
        ElementwiseMatch m;
        std::string why;
        if (!privately || !matchElementwise(p, m, &why) || refuse(p)) continue;
        set.insert(p);
        all.emplace_back(p, std::move(m));
        grew = true;
        break;
      }
    }
  }
  std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.first->isBefore(y.first); });
  nodes.clear();
  matches.clear();
  for (auto& [n, m] : all) {
    nodes.push_back(n);
    matches.push_back(std::move(m));
  }
}

// A reduction after `red` in its block over an elementwise value (a fused reduction to be) of a
// provably higher rank than red's value, whose value `v` is or is computed from by elementwise
// ops: nullptr where none. Such a reduction is the better host of an epilogue reading both: the
// epilogue runs at its value's size, and red's smaller value is read broadcast (YOLOX's IoU reads
// the areas' products [M] and the intersection's [N, M]).
Node* largerLaterReduction(Value* v, Value* reduced, RankBounds& ranks, int depth = 0) {
  Node *n = v->node(), *red = reduced->node();
  if (depth > 8 || n->owningBlock() != red->owningBlock() || !red->isBefore(n)) return nullptr;
  ReductionMatch rm;
  ElementwiseMatch em;
  if (matchReduction(n, rm, nullptr)) {
    if (rm.spec.withIndices()) return nullptr;  // hosts no epilogue
    Node* p = rm.input->node();
    const bool fused = p->owningBlock() == n->owningBlock() && matchElementwise(p, em, nullptr);
    return fused && ranks.atLeast(v) > ranks.atLeast(reduced) ? n : nullptr;
  }
  if (n->outputs().size() != 1 || !matchElementwise(n, em, nullptr)) return nullptr;
  for (Value* in : n->inputs())
    if (Node* r = largerLaterReduction(in, reduced, ranks, depth + 1)) return r;
  return nullptr;
}

}  // namespace

Epilogue planEpilogue(Value* reduced, bool standIn) {
  // Walk the block after the reduction, taking every elementwise node that reads the reduced value
  // or a taken node's output; stop at the first other reader. A prefix of the taken nodes is an
  // epilogue when only its last value is read outside it; the longest such prefix is kept.
  constexpr int kScanLimit = 64;  // nodes looked at: epilogues are short, blocks can be long
  Node* red = reduced->node();
  std::vector<Node*> taken;
  std::vector<ElementwiseMatch> matches;
  torch::jit::Block* block = red->owningBlock();
  std::unordered_set<Node*> readers;  // nodes of this block reading a taken value (or inside it)
  auto addReaders = [&](Value* v) {
    for (const auto& u : v->uses()) {
      Node* top = u.user;
      while (top->owningBlock() != block) top = top->owningBlock()->owningNode();
      readers.insert(top);
    }
  };
  addReaders(reduced);
  std::unordered_set<Node*> set;
  size_t best = 0;
  int scanned = 0;
  std::string stop;
  RankBounds ranks;
  auto readsLargerLater = [&](Node* n) -> Node* {
    for (Value* in : n->inputs())
      if (Node* r = largerLaterReduction(in, reduced, ranks)) return r;
    return nullptr;
  };
  for (Node* n = red->next(); n != block->return_node() && scanned < kScanLimit; n = n->next(), ++scanned) {
    if (changesGradMode(n)) {
      stop = std::string(n->kind().toQualString()) + " changes the autograd mode";
      break;
    }
    if (!readers.count(n)) continue;
    if (standIn && isMetadataRead(n) && n->input(0) == reduced) continue;  // reads a stand-in
    ElementwiseMatch m;
    std::string why;
    if (!n->blocks().empty() || !matchElementwise(n, m, &why)) {
      if (!why.empty()) stop = std::string(n->kind().toQualString()) + ": " + why;
      break;
    }
    if (Node* r = readsLargerLater(n)) {
      // The ops before n that it reads join that epilogue too (they would be stored at its size).
      stop = std::string(n->kind().toQualString()) + " reads the value of " + r->kind().toQualString() +
             ", a later reduction of higher rank, whose epilogue takes it and what it reads of this one";
      best = 0;
      break;
    }
    taken.push_back(n);
    matches.push_back(std::move(m));
    addReaders(n->output());
    set.insert(n);
    Value* open = nullptr;
    if (openValues(reduced, taken, set, &open, standIn) == 1 && open == n->output()) best = taken.size();
  }
  taken.resize(best);
  matches.resize(best);
  absorbPrivateProducers(reduced, taken, matches, [&](Node* p) { return readsLargerLater(p) != nullptr; });
  Epilogue epi;
  epi.chain = taken;
  epi.stop = std::move(stop);
  if (standIn && !epi.chain.empty())
    for (const auto& u : reduced->uses())
      if (isMetadataRead(u.user)) epi.metadataReaders.push_back(u.user);
  std::unordered_map<Value*, int64_t> valueIndex{{reduced, -1}};
  for (size_t k = 0; k < epi.chain.size(); ++k) {
    Instr ins{matches[k].op, {}};
    for (const MatchedArg& a : matches[k].args) {
      Value* v = a.operand();
      if (!v) {
        ins.args.push_back(a.constant);
      } else if (auto it = valueIndex.find(v); it != valueIndex.end()) {
        ins.args.push_back(it->second < 0 ? Arg::input(0) : Arg::value(it->second));
      } else {
        auto pos = std::find(epi.extra.begin(), epi.extra.end(), v);
        if (pos == epi.extra.end()) pos = epi.extra.insert(epi.extra.end(), v);
        ins.args.push_back(Arg::input(1 + (pos - epi.extra.begin())));
      }
    }
    epi.expr.instrs.push_back(std::move(ins));
    valueIndex.emplace(epi.chain[k]->output(), static_cast<int64_t>(k));
  }
  epi.expr.numInputs = 1 + static_cast<int>(epi.extra.size());
  if (!epi.chain.empty()) epi.expr.validate();
  return epi;
}

}  // namespace tsfuse
