// note_stored_broadcasts (passes/note_stored_broadcasts.h): the broadcasts a graph still
// stores after fusion, each named with its reason. Four shapes of it, in the graph as fusion
// left it:
//
//   %e = aten::expand(%x1, [n, k, d])        a copy of an expanded value: "aten::reshape copies the
//   %r = aten::reshape(%e, [-1, d])          broadcast aten::expand made, [n*k, d] stored"
//
//   %r = aten::repeat(%y1, [n, 1, 1])        a broadcast spelled as a copy, read by an elementwise
//   %s = aten::sub(%x1, %r)                  op: "aten::repeat copies its input ..."
//
//   %s = aten::sub(%a, %b)                   [N, 1, D] - [1, M, D] (by the sizes in the types, or
//   %m = aten::matmul(%s, %w)                a[:, None] - b[None]: new dims at different places)
//                                            left unfused because its reader is no op a region holds
//
//   %c = aten::cosine_similarity(%a, %b, ..) an op neither fused nor decomposed over operands that
//                                            broadcast so: the broadcast is computed inside it
//
// Each is a rejection event of this pass (so it lists with the other passes' candidates); the
// walk records, it never rewrites.
#include "passes/note_stored_broadcasts.h"

#include "passes/analysis/broadcast_probe.h"
#include "passes/analysis/op_table.h"
#include "passes/analysis/shape_facts.h"
#include "passes/framework/driver.h"

#include "kernels/runtime/full_slice.h"

#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

namespace tsfuse {
namespace {

using torch::jit::Value;

// Views that keep an expanded axis expanded (a copy after them still copies the broadcast).
bool keepsExpansion(const Node* n) {
  switch (n->kind()) {
    case c10::aten::unsqueeze:
    case c10::aten::slice:
    case c10::aten::select:
    case c10::aten::narrow:
    case c10::aten::transpose:
    case c10::aten::permute:
    case c10::aten::t:
    case c10::aten::numpy_T:
    case c10::aten::mT:
    case c10::aten::squeeze:
      return true;
    default:
      return isExpand(n);
  }
}

bool copiesItsInput(const Node* n) {
  switch (n->kind()) {
    case c10::aten::reshape:
    case c10::aten::flatten:
    case c10::aten::contiguous:
    case c10::aten::clone:
      return true;
    default:
      return false;
  }
}

bool isRepeat(const Node* n) {
  return n->kind() == c10::aten::repeat || n->kind() == c10::aten::tile || n->kind() == c10::aten::repeat_interleave;
}

// The expand the value `v` is a view of, if any.
Node* expandBehind(Value* v) {
  for (Node* p = v->node(); keepsExpansion(p) && !p->inputs().empty(); p = p->input(0)->node())
    if (isExpand(p)) return p;
  return nullptr;
}

// Whether an elementwise op or a reduction reads `v` (through views and other repeats).
bool computedWith(Value* v, int depth = 0) {
  if (depth > 8) return false;
  for (const torch::jit::Use& u : v->uses()) {
    ElementwiseMatch m;
    ReductionMatch r;
    if (matchElementwise(u.user, m, nullptr) || matchReduction(u.user, r, nullptr)) return true;
    if ((keepsExpansion(u.user) || isRepeat(u.user) || u.user->kind() == c10::aten::reshape ||
         u.user->kind() == c10::aten::view) &&
        u.user->outputs().size() == 1 && computedWith(u.user->output(), depth + 1))
      return true;
  }
  return false;
}

// The sizes of a tensor value whose type carries them all (traced graphs, profiled ones).
std::optional<std::vector<int64_t>> completeSizes(Value* v) {
  auto t = v->type()->cast<c10::TensorType>();
  if (!t) return std::nullopt;
  return t->sizes().concrete_sizes();
}

std::string sizesText(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// The readers of `v` (through views) that no fused region holds, described; nullopt where a fused
// op reads it (then the fusion passes' events say why it stays).
std::optional<std::vector<std::string>> foreignReaders(Value* v, std::unordered_set<Value*>& seen) {
  std::vector<std::string> out;
  if (!seen.insert(v).second) return out;
  for (const torch::jit::Use& u : v->uses()) {
    ElementwiseMatch m;
    ReductionMatch r;
    if (isTsfuseOp(u.user)) return std::nullopt;
    if (matchElementwise(u.user, m, nullptr) || matchReduction(u.user, r, nullptr) || isMetadataRead(u.user)) continue;
    if (keepsExpansion(u.user) && u.user->outputs().size() == 1) {
      std::optional<std::vector<std::string>> further = foreignReaders(u.user->output(), seen);
      if (!further) return std::nullopt;
      for (std::string& d : *further) out.push_back(std::move(d));
      continue;
    }
    if (u.user->kind() == c10::prim::ListConstruct) {  // torch.cat((a, b)): the list's readers read it
      for (const torch::jit::Use& l : u.user->output()->uses()) out.push_back(describeNode(l.user));
      continue;
    }
    out.push_back(describeNode(u.user));
  }
  return out;
}

class Note : public Pattern {
 public:
  Note() : Pattern("note_stored_broadcasts", WalkOrder::Forward, NestedBlocks::AtOwner) {}

  bool matchAndRewrite(Node* n, Rewriter& rw) override {
    if (copiesItsInput(n) && !n->inputs().empty()) {
      if (Node* e = expandBehind(n->input(0)))
        return rw.notifyMatchFailure(
            {e, n}, describeNode(n) + " copies the broadcast " + describeNode(e) +
                        " made, so the expanded value is stored in full: a region reads an expanded operand "
                        "as a view, but no copy of one (compute on the unexpanded operands, then reshape the "
                        "result)");
    }
    if (isRepeat(n) && computedWith(n->output()))
      return rw.notifyMatchFailure(
          {n}, describeNode(n) +
                   " copies its input to the repeated size before an elementwise op reads it: a broadcast "
                   "spelled as a copy, stored in full (unsqueeze and broadcasting, or expand, give the same "
                   "values as a view a region reads in place)");
    ElementwiseMatch m;
    if (!matchElementwise(n, m, nullptr)) return noteComposite(n, rw);
    std::vector<Value*> tensors;
    for (const MatchedArg& a : m.args)
      if (a.tensor) tensors.push_back(a.tensor);
    std::optional<std::string> broadcast = outerProductOf(tensors);
    if (!broadcast) return false;
    std::unordered_set<Value*> seen;
    const std::optional<std::vector<std::string>> readers = foreignReaders(n->output(), seen);
    if (!readers || readers->empty()) return false;  // a region reads it, or only regions could
    std::string list;
    for (size_t i = 0; i < readers->size() && i < 3; ++i) list += (i ? ", " : "") + (*readers)[i];
    return rw.notifyMatchFailure(
        {n}, describeNode(n) + " broadcasts " + *broadcast + " and stays unfused: its value is read by " + list +
                 ", which no fused region holds, so a region of this op alone would store the same value");
  }

  // An op no region holds and no decomposition made fusible (cosine_similarity(z[:, None], z[None]))
  // over operands that broadcast to an outer product: the op computes over the broadcast itself.
  static bool noteComposite(Node* n, Rewriter& rw) {
    if (isTsfuseOp(n) || isMetadataRead(n) || !n->maybeSchema()) return false;
    std::vector<Value*> tensors;
    for (Value* v : n->inputs())
      if (v->type()->cast<c10::TensorType>()) tensors.push_back(v);
    std::optional<std::string> broadcast = tensors.size() >= 2 ? outerProductOf(tensors) : std::nullopt;
    if (!broadcast) return false;
    return rw.notifyMatchFailure({n}, describeNode(n) + " reads operands that broadcast to an outer product (" +
                                          *broadcast +
                                          ") and is no op tsfuse fuses or decomposes: the broadcast is computed "
                                          "inside it, where ATen's kernel may store it in full");
  }

  // How tensor operands broadcast to an outer product, or nullopt: by their sizes where the types
  // carry them all ("[5, 1, 2] against [1, 4, 2]"), else by where each gained a new dim (x[:, None]
  // against y[None]: "%x with a new dim 1 against %y with a new dim 0"), which is such a product
  // whenever the dims kept have more than one element.
  static std::optional<std::string> outerProductOf(const std::vector<Value*>& tensors) {
    std::vector<std::vector<int64_t>> shapes;
    std::vector<std::pair<Value*, int64_t>> newDims;
    bool sized = true;
    for (Value* t : tensors) {
      std::optional<std::vector<int64_t>> s = completeSizes(t);
      sized = sized && s;
      if (s) shapes.push_back(std::move(*s));
      if (std::optional<std::pair<Value*, int64_t>> d = newDimOf(t)) newDims.push_back(*d);
    }
    for (size_t i = 0; sized && i < shapes.size(); ++i)
      for (size_t j = 0; j < shapes.size(); ++j)
        if (outerProduct(shapes[i], shapes[j])) return sizesText(shapes[i]) + " against " + sizesText(shapes[j]);
    if (sized) return std::nullopt;  // the sizes say it is none
    for (size_t i = 0; i < newDims.size(); ++i)
      for (size_t j = i + 1; j < newDims.size(); ++j)
        if (newDims[i].second != newDims[j].second)
          return "%" + newDims[i].first->debugName() + " with a new dim " + std::to_string(newDims[i].second) +
                 " against %" + newDims[j].first->debugName() + " with a new dim " + std::to_string(newDims[j].second);
    return std::nullopt;
  }

  // The tensor `v` views with one new dim (unsqueeze, x[:, None]) and that dim, through the
  // slices around it; nullopt for anything else.
  static std::optional<std::pair<Value*, int64_t>> newDimOf(Value* v) {
    Node* p = beneathSlices(v->node());
    if (p->kind() != c10::aten::unsqueeze || p->inputs().size() != 2) return std::nullopt;
    auto d = torch::jit::toIValue(p->input(1));
    if (!d || !d->isInt() || d->toInt() < 0) return std::nullopt;
    Node* base = beneathSlices(p->input(0)->node());
    return std::make_pair(base->outputs().size() == 1 ? base->output() : p->input(0), d->toInt());
  }

  // The first node under `n`'s chain of slices (aten::slice, tsfuse::full_slice) that is not one.
  static Node* beneathSlices(Node* n) {
    static const c10::Symbol fullSlice = c10::Symbol::fromQualString(kFullSliceOp);
    while ((n->kind() == c10::aten::slice || n->kind() == fullSlice) && !n->inputs().empty()) n = n->input(0)->node();
    return n;
  }
};

}  // namespace

bool NoteStoredBroadcasts(std::shared_ptr<torch::jit::Graph>& graph) {
  Note p;
  runPattern(graph, p);
  return false;
}

}  // namespace tsfuse
