#include "passes/regions/region.h"

#include "kernels/runtime/hoist.h"
#include "kernels/ir/op_registry.h"

#include <torch/csrc/jit/ir/named_value.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

namespace tsfuse {

namespace {

// A duplicated subexpression costs its ops once more per reader: at most this many ops.
constexpr size_t kMaxRecomputed = 8;

// The tsfuse::broadcast_* op whose views `unpack` unpacks (sink_views' views of a value's leaves),
// or nullptr when `unpack` is not a prim::ListUnpack of one.
Node* broadcastViews(Node* unpack) {
  if (unpack->kind() != c10::prim::ListUnpack) return nullptr;
  Node* views = unpack->input()->node();
  return std::string(views->kind().toQualString()).rfind("tsfuse::broadcast_", 0) == 0 ? views : nullptr;
}

// The region grown from root. duplicate: a producer whose value others read too joins where
// every reader is fusible and the op cheap (it is then recomputed here, not read stored).
Region grow(Node* root, bool duplicate) {
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
        bool usedOutside = false;
        for (const auto& use : a.tensor->uses()) usedOutside |= !in.count(use.user);
        if (usedOutside && duplicate && cheapToRecompute(pm.op) && fusibleReaders(a.tensor) && broadcasts(p)) {
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
                             std::to_string(others.size()) + " other fusible op(s): recomputed here rather than stored");
  }
  grown.recomputed = std::move(shared);
  return grown;
}

// The nodes a region leaves in the graph for other readers: those it recomputes and, within the
// region, what they read.
std::vector<Node*> keptForOthers(const Region& r) {
  std::unordered_set<Node*> in(r.nodes.begin(), r.nodes.end()), kept;
  std::vector<Node*> todo = r.recomputed;
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

bool cheapToRecompute(Op op) {
  const OpDef& def = opDef(op);
  return def.rule != LowerRule::Aten && (!def.prim() || primHas(*def.prim(), kJit));
}

bool fusibleReaders(Value* v) {
  for (const auto& use : v->uses()) {
    Node* u = use.user;
    if (u->owningBlock() != v->node()->owningBlock()) return false;
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
    if (depth < 4 && q->owningBlock() == p->owningBlock() && matchElementwise(q, m, nullptr) && broadcasts(q, depth + 1))
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

Region growRegion(Node* root) {
  Region r = grow(root, /*duplicate=*/true);
  if (r.recomputed.empty() || cheaplyRecomputed(r, keptForOthers(r))) return r;
  return grow(root, false);
}

bool recomputable(const Region& r) { return cheaplyRecomputed(r, r.nodes) && broadcasts(r.root()); }

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
  std::vector<std::vector<char>> reads(n, std::vector<char>(operands, 0));  // each value's operands
  int noted = 0;
  for (size_t k = 0; k < n; ++k) {
    for (const Arg& a : r.expr.instrs[k].args) {
      if (a.kind == Arg::Kind::Input) reads[k][a.i] = 1;
      if (a.kind == Arg::Kind::Value)
        for (size_t i = 0; i < operands; ++i) reads[k][i] |= reads[a.i][i];
    }
    const size_t count = std::count(reads[k].begin(), reads[k].end(), 1);
    if (k + 1 == n || !costlyPerValue(r.expr.instrs[k].op) || count == 0 || count == operands || noted == 3) continue;
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

Node* writerBetween(const std::vector<Value*>& values, Node* from, Node* to, AliasDb& aliasDb) {
  TORCH_INTERNAL_ASSERT(from->owningBlock() == to->owningBlock() && !to->isBefore(from),
                        "writerBetween: the range must be in one block, in order");
  std::vector<Value*> written;
  for (Value* v : values)
    if (aliasDb.hasWriters(v)) written.push_back(v);  // cheap filter: most values have no writer
  if (written.empty()) return nullptr;
  const torch::jit::ValueSet set(written.begin(), written.end());
  for (Node* n = from->next(); n != to->next(); n = n->next())
    if (aliasDb.writesToAlias(n, set)) return n;
  return nullptr;
}

std::string readHazard(const std::vector<Value*>& values, Node* first, Node* at, AliasDb& aliasDb) {
  Node* w = writerBetween(values, first, at, aliasDb);
  if (!w) return "";
  for (Value* v : values)
    if (aliasDb.writesToAlias(w, {v}))
      return "operand %" + v->debugName() + " (or a tensor it may alias) is written by an in-place op (" + describeNode(w) +
             ") between the region's reads";
  return "an operand is written by an in-place op (" + describeNode(w) + ") between the region's reads";
}

std::string regionHazard(const Region& r, Node* at, AliasDb& aliasDb) {
  return readHazard(r.operands, r.nodes.front(), at, aliasDb);
}

std::optional<Region> hazardFreeRegion(Node* producer, Node* consumer, Rewriter& rw) {
  Region r = growRegion(producer);
  std::string hazard = regionHazard(r, consumer, rw.aliasDb());
  if (hazard.empty()) return r;
  std::vector<Node*> nodes = {consumer};
  nodes.insert(nodes.end(), r.nodes.begin(), r.nodes.end());
  rw.notifyMatchFailure(nodes, hazard);
  return std::nullopt;
}

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
    if (!p || p->owningBlock() != at->owningBlock()) continue;
    bool onlyRegion = true;
    for (const auto& use : v->uses()) onlyRegion &= in.count(use.user) > 0;
    if (!onlyRegion) continue;  // the repeated tensor escapes: it is stored anyway
    if (writerBetween({p->input(0)}, p, at, aliasDb)) continue;
    r.repeats.push_back(p);
    note += "; repeat %" + v->debugName() + " read as a broadcast";
  }
  return note;
}

Value* insertOperandList(Graph& g, const Region& r) {
  std::vector<Value*> operands = r.operands;
  std::vector<Value*> others;  // the tensors whose layout a broadcast_repeat must agree with
  for (Value* v : r.operands)
    if (isTensor(v) && std::find(r.repeats.begin(), r.repeats.end(), v->node()) == r.repeats.end())
      others.push_back(v);
  for (Value*& v : operands) {
    Node* p = v->node();
    if (std::find(r.repeats.begin(), r.repeats.end(), p) == r.repeats.end()) continue;
    Value* list = g.insertNode(g.createList(c10::TensorType::get(), others))->output();
    v = g.insert(c10::Symbol::fromQualString("tsfuse::broadcast_repeat"), {p->input(0), p->input(1), list}, {},
                 p->sourceRange());
  }
  return insertTensorList(g, operands);
}

Value* insertTensorList(Graph& g, const std::vector<Value*>& values) {
  std::vector<Value*> tensors = values;
  for (Value*& v : tensors) {
    if (isTensor(v)) continue;
    Value* number = v;
    v = g.insert(c10::Symbol::fromQualString("tsfuse::wrapped_number"), {number});
    v->setType(c10::TensorType::fromNumberType(*number->type()));
  }
  return g.insertNode(g.createList(c10::TensorType::get(), tensors))->output();
}

void eraseRegionNodes(Rewriter& rw, const Region& r) {
  for (auto it = r.nodes.rbegin(); it != r.nodes.rend(); ++it)
    if (!(*it)->hasUses()) rw.erase(*it);  // what it recomputes for other readers stays
}

void eraseFusedOp(Rewriter& rw, Node* fused) {
  Node* list = fused->input(0)->node();
  rw.erase(fused);
  if (list->kind() == c10::prim::ListConstruct && !list->hasUses()) rw.erase(list);
}

Node* rewriteRegion(Rewriter& rw, Region& r, Node* consumer, const char* op,
                    const std::vector<torch::jit::NamedValue>& extra) {
  Graph& g = rw.graph();
  torch::jit::WithInsertPoint guard(consumer);
  Value* list = insertOperandList(g, r);
  std::vector<torch::jit::NamedValue> args = {list, r.expr.str()};
  args.insert(args.end(), extra.begin(), extra.end());
  Value* out = g.insert(c10::Symbol::fromQualString(op), args, {}, consumer->sourceRange());
  Node* fused = out->node();
  fused->setSourceRange(consumer->sourceRange());
  rw.replaceAllUsesWith(consumer->output(), out);
  if (consumer != r.root()) rw.erase(consumer);
  eraseRegionNodes(rw, r);
  // A repeat read only by the region's nodes goes with them; one a kept node still reads (an
  // intermediate recomputed for a reader outside) stays for it.
  for (Node* p : r.repeats)
    if (!p->hasUses()) rw.erase(p);
  return fused;
}

namespace {

// Values of `nodes` (and `reduced`) read by a node outside them.
size_t openValues(Value* reduced, const std::vector<Node*>& nodes, const std::unordered_set<Node*>& set,
                  Value** open) {
  size_t count = 0;
  auto check = [&](Value* v) {
    for (const auto& u : v->uses())
      if (!set.count(u.user)) {
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
void absorbPrivateProducers(Value* reduced, std::vector<Node*>& nodes, std::vector<ElementwiseMatch>& matches) {
  if (nodes.empty()) return;
  torch::jit::Block* block = reduced->node()->owningBlock();
  std::unordered_set<Node*> set(nodes.begin(), nodes.end());
  std::vector<std::pair<Node*, ElementwiseMatch>> all;
  for (size_t k = 0; k < nodes.size(); ++k) all.emplace_back(nodes[k], std::move(matches[k]));
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t k = 0; k < all.size() && !grew; ++k) {
      for (const MatchedArg& a : all[k].second.args) {
        if (!a.tensor || a.tensor == reduced) continue;
        Node* p = a.tensor->node();
        if (set.count(p) || p->owningBlock() != block || p->outputs().size() != 1) continue;
        bool privately = true;
        for (const auto& u : a.tensor->uses()) privately &= set.count(u.user) > 0;
        ElementwiseMatch m;
        std::string why;
        if (!privately || !matchElementwise(p, m, &why)) continue;
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

}  // namespace

Epilogue planEpilogue(Value* reduced) {
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
  for (Node* n = red->next(); n != block->return_node() && scanned < kScanLimit; n = n->next(), ++scanned) {
    if (!readers.count(n)) continue;
    ElementwiseMatch m;
    std::string why;
    if (!n->blocks().empty() || !matchElementwise(n, m, &why)) {
      if (!why.empty()) stop = std::string(n->kind().toQualString()) + ": " + why;
      break;
    }
    taken.push_back(n);
    matches.push_back(std::move(m));
    addReaders(n->output());
    set.insert(n);
    Value* open = nullptr;
    if (openValues(reduced, taken, set, &open) == 1 && open == n->output()) best = taken.size();
  }
  taken.resize(best);
  matches.resize(best);
  absorbPrivateProducers(reduced, taken, matches);
  Epilogue epi;
  epi.chain = taken;
  epi.stop = std::move(stop);
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
