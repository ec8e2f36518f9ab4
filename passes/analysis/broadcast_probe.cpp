#include "passes/analysis/broadcast_probe.h"

#include "passes/analysis/op_table.h"
#include "passes/analysis/region_starts.h"

#include "kernels/runtime/full_slice.h"

#include <torch/csrc/jit/ir/constants.h>

#include <algorithm>
#include <limits>
#include <optional>
#include <unordered_map>
#include <vector>

namespace tsfuse {
namespace {

using torch::jit::Block;
using torch::jit::Graph;

constexpr int64_t kUnknown = -1;
constexpr int64_t kNotKnown = std::numeric_limits<int64_t>::min();  // an entry of a size list
// Traced graphs spell an open slice end as INT64_MAX; anything this large means "to the end".
constexpr int64_t kOpenEnd = int64_t{1} << 62;

struct Axis {
  int64_t size = kUnknown;
  bool stretched = false;  // an expanded axis (stride 0): its values do not vary along it
};
using Shape = std::vector<Axis>;

// Flat: the operand does not vary along the axis, so a broadcast repeats it there.
bool flat(const Shape& s, size_t fromRight) {
  if (fromRight >= s.size()) return true;  // a missing leading axis
  const Axis& a = s[s.size() - 1 - fromRight];
  return a.size == 1 || a.stretched;
}
// Full: it may vary along the axis (an unknown size counts: see the header).
bool full(const Shape& s, size_t fromRight) { return !flat(s, fromRight) && s[s.size() - 1 - fromRight].size != 0; }

// Two operands flat on different axes, each full where the other is flat.
bool outerProduct(const std::vector<const Shape*>& operands) {
  size_t rank = 0;
  for (const Shape* s : operands) rank = std::max(rank, s->size());
  for (const Shape* a : operands)
    for (const Shape* b : operands)
      for (size_t i = 0; i < rank; ++i)
        for (size_t j = 0; j < rank; ++j)
          if (i != j && flat(*a, i) && full(*b, i) && flat(*b, j) && full(*a, j)) return true;
  return false;
}

Shape broadcast(const std::vector<const Shape*>& operands) {
  size_t rank = 0;
  for (const Shape* s : operands) rank = std::max(rank, s->size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    Axis& o = out[rank - 1 - i];
    o.size = 1;
    bool varies = false, stretched = false, unknown = false;
    for (const Shape* s : operands) {
      if (i >= s->size()) continue;
      const Axis& a = (*s)[s->size() - 1 - i];
      if (a.size == kUnknown)
        unknown = true;
      else if (a.size != 1)
        o.size = a.size;
      if (a.stretched)
        stretched = true;
      else if (a.size != 1)
        varies = true;
    }
    if (o.size == 1 && unknown) o.size = kUnknown;
    o.stretched = stretched && !varies;
  }
  return out;
}

std::optional<int64_t> normDim(int64_t d, size_t rank) {
  if (d < 0) d += static_cast<int64_t>(rank);
  if (d < 0 || d >= static_cast<int64_t>(rank)) return std::nullopt;
  return d;
}

class Probe {
 public:
  void bind(Value* v, const c10::IValue& iv) {
    if (iv.isTensor()) {
      const at::Tensor& t = iv.toTensor();
      if (!t.defined() || t.is_nested()) return;
      const bool strided = t.layout() == c10::kStrided;  // sparse and mkldnn tensors have no strides
      Shape s;
      for (int64_t d = 0; d < t.dim(); ++d) s.push_back({t.size(d), strided && t.stride(d) == 0 && t.size(d) > 1});
      shapes_[v] = std::move(s);
    } else if (iv.isObject() || iv.isTuple() || iv.isList() || iv.isInt()) {
      values_[v] = iv;
    }
  }

  Node* scan(Block* block) {
    for (Node* n : block->nodes()) {
      if (n->kind() == c10::prim::CallFunction || n->kind() == c10::prim::CallMethod) return n;
      if (Node* found = visit(n)) return found;
      for (Block* sub : n->blocks())
        if (Node* found = scan(sub)) return found;
      if (n->kind() == c10::prim::If) joinBranches(n);
    }
    return nullptr;
  }

 private:
  std::unordered_map<Value*, Shape> shapes_;
  std::unordered_map<Value*, c10::IValue> values_;  // modules, tuples, lists and ints of the call

  const Shape* shapeOf(Value* v) const {
    auto it = shapes_.find(v);
    return it == shapes_.end() ? nullptr : &it->second;
  }

  std::optional<c10::IValue> valueOf(Value* v) const {
    auto it = values_.find(v);
    if (it != values_.end()) return it->second;
    return torch::jit::toIValue(v);
  }

  std::optional<int64_t> intOf(Value* v) const {
    std::optional<c10::IValue> iv = valueOf(v);
    if (iv && iv->isInt()) return iv->toInt();
    return std::nullopt;
  }

  // A size list: constants, or sizes this probe followed; kNotKnown where neither (not -1, which
  // view and expand read as "infer" and "keep").
  std::optional<std::vector<int64_t>> sizesOf(Value* v) const {
    if (v->node()->kind() == c10::prim::ListConstruct) {
      std::vector<int64_t> sizes;
      for (Value* e : v->node()->inputs()) sizes.push_back(intOf(e).value_or(kNotKnown));
      return sizes;
    }
    std::optional<c10::IValue> iv = valueOf(v);
    if (iv && iv->isIntList()) return iv->toIntVector();
    return std::nullopt;
  }

  void element(Value* out, const c10::IValue& container, std::optional<int64_t> index) {
    if (!index) return;
    if (container.isTuple()) {
      const auto& e = container.toTupleRef().elements();
      if (*index >= 0 && *index < static_cast<int64_t>(e.size())) bind(out, e[*index]);
    } else if (container.isList()) {
      c10::List<c10::IValue> l = container.toList();
      int64_t i = *index < 0 ? *index + static_cast<int64_t>(l.size()) : *index;
      if (i >= 0 && i < static_cast<int64_t>(l.size())) bind(out, l.get(i));
    }
  }

  // Follows `n`'s sizes; returns `n` when it starts a region over an outer product.
  Node* visit(Node* n) {
    if (Node* found = elementwise(n)) return found;
    if (reduction(n)) return nullptr;
    const auto in = n->inputs();
    const Shape* x = in.empty() ? nullptr : shapeOf(in[0]);
    switch (n->kind()) {
      case c10::prim::GetAttr: {
        std::optional<c10::IValue> self = valueOf(in[0]);
        const std::string& name = n->s(c10::attr::name);
        if (self && self->isObject() && self->toObjectRef().type()->hasAttribute(name))
          bind(n->output(), self->toObjectRef().getAttr(name));
        return nullptr;
      }
      case c10::prim::ConstantChunk:
        if (x) split(n, *x, n->i(c10::attr::dim), Split::Chunk, n->i(c10::attr::chunks));
        return nullptr;
      case c10::prim::ListUnpack:
        if (unpackPieces(n)) return nullptr;
        [[fallthrough]];
      case c10::prim::TupleUnpack:
        if (std::optional<c10::IValue> c = valueOf(in[0]))
          for (size_t i = 0; i < n->outputs().size(); ++i) element(n->output(i), *c, static_cast<int64_t>(i));
        return nullptr;
      case c10::prim::TupleIndex:
      case c10::aten::__getitem__:
        if (std::optional<c10::IValue> c = valueOf(in[0])) element(n->output(), *c, intOf(in[1]));
        return nullptr;
      default:
        break;
    }
    if (!x) return nullptr;
    // A reshape of an expanded value copies the broadcast (flattened pairs, which sink_reshapes
    // computes past): as much a broadcast stored as an outer product.
    if (n->kind() == c10::aten::reshape &&
        std::any_of(x->begin(), x->end(), [](const Axis& a) { return a.stretched && a.size != 1; }))
      return n;
    view(n, *x);
    return nullptr;
  }

  // An If's outputs: what both branches agree on (torchvision's _upcast returns its input from
  // one branch and a converted copy from the other). A branch that raises yields no value.
  void joinBranches(Node* n) {
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      std::vector<const Shape*> branches;
      for (Block* b : n->blocks()) {
        Value* v = b->outputs()[i];
        if (v->node()->kind() == c10::prim::Uninitialized) continue;
        branches.push_back(shapeOf(v));
      }
      if (branches.empty() || std::find(branches.begin(), branches.end(), nullptr) != branches.end()) continue;
      Shape out = *branches[0];
      bool agree = true;
      for (const Shape* other : branches) {
        if (other->size() != out.size()) agree = false;
        for (size_t k = 0; agree && k < out.size(); ++k) {
          if ((*other)[k].size != out[k].size) out[k].size = kUnknown;
          out[k].stretched = out[k].stretched && (*other)[k].stretched;
        }
      }
      if (agree) shapes_[n->output(i)] = std::move(out);
    }
  }

  enum class Split { Chunk, Size, Unbind };

  // The pieces of x along `dim` as the outputs of `n`: chunk(x, c, dim), split(x, size, dim),
  // unbind(x, dim).
  void split(Node* n, const Shape& x, int64_t dim, Split how, int64_t amount) {
    std::optional<int64_t> d = normDim(dim, x.size());
    if (!d) return;
    const int64_t whole = x[*d].size;
    const int64_t piece = how == Split::Unbind || whole == kUnknown || amount <= 0 ? kUnknown
                          : how == Split::Chunk                                    ? (whole + amount - 1) / amount
                                                                                   : amount;
    for (size_t i = 0; i < n->outputs().size(); ++i) {
      Shape out = x;
      if (how == Split::Unbind) {
        out.erase(out.begin() + *d);
      } else {
        const int64_t start = piece == kUnknown ? 0 : static_cast<int64_t>(i) * piece;
        out[*d] = {piece == kUnknown ? kUnknown : std::clamp<int64_t>(whole - start, 0, piece), false};
      }
      shapes_[n->output(i)] = std::move(out);
    }
  }

  // prim::ListUnpack of chunk / split / unbind: the pieces' shapes.
  bool unpackPieces(Node* unpack) {
    Node* p = unpack->input()->node();
    const Shape* x = p->inputs().empty() ? nullptr : shapeOf(p->input(0));
    if (!x) return false;
    if (p->kind() == c10::aten::unbind && p->inputs().size() == 2) {
      if (std::optional<int64_t> d = intOf(p->input(1))) split(unpack, *x, *d, Split::Unbind, 0);
      return true;
    }
    if ((p->kind() == c10::aten::chunk || p->kind() == c10::aten::split) && p->inputs().size() == 3) {
      std::optional<int64_t> amount = intOf(p->input(1)), d = intOf(p->input(2));
      if (amount && d) split(unpack, *x, *d, p->kind() == c10::aten::chunk ? Split::Chunk : Split::Size, *amount);
      return true;
    }
    return false;
  }

  // Elementwise ops broadcast their tensor operands.
  Node* elementwise(Node* n) {
    ElementwiseMatch m;
    if (!matchElementwise(n, m, nullptr)) return nullptr;
    std::vector<const Shape*> operands;
    for (const MatchedArg& a : m.args) {
      if (!a.tensor) continue;
      const Shape* s = shapeOf(a.tensor);
      if (!s) return nullptr;  // an operand of unknown rank: nothing to judge, nothing to follow
      operands.push_back(s);
    }
    if (operands.empty()) return nullptr;
    shapes_[n->output()] = broadcast(operands);
    return outerProduct(operands) && startsRegion(n) ? n : nullptr;
  }

  bool reduction(Node* n) {
    ReductionMatch r;
    if (!matchReduction(n, r, nullptr)) return false;
    const Shape* x = shapeOf(r.input);
    if (!x) return true;
    Shape out;
    if (r.spec.dims && !r.spec.dims->empty()) {
      std::vector<bool> reduced(x->size(), false);
      for (int64_t d : *r.spec.dims)
        if (std::optional<int64_t> k = normDim(d, x->size())) reduced[*k] = true;
      for (size_t k = 0; k < x->size(); ++k) {
        if (!reduced[k])
          out.push_back((*x)[k]);
        else if (r.spec.keepdim)
          out.push_back({1, false});
      }
    } else if (r.spec.keepdim) {
      out.assign(x->size(), Axis{1, false});
    }
    for (Value* o : n->outputs()) shapes_[o] = out;
    return true;
  }

  // Views and other shape-only ops of one tensor.
  void view(Node* n, const Shape& x) {
    const auto in = n->inputs();
    Shape out = x;
    static const c10::Symbol fullSlice = c10::Symbol::fromQualString(kFullSliceOp);
    if (n->kind() == fullSlice) {  // x itself, after slice's checks
      shapes_[n->output()] = std::move(out);
      return;
    }
    switch (n->kind()) {
      case c10::aten::to:  // the overloads the registry does not carry (device, layout)
      case c10::aten::type_as:
      case c10::aten::contiguous:
      case c10::aten::clone:
      case c10::aten::detach:
      case c10::aten::empty_like:
      case c10::aten::zeros_like:
      case c10::aten::ones_like:
      case c10::aten::full_like:
      case c10::aten::rand_like:
      case c10::aten::randn_like:
      case c10::aten::softmax:
      case c10::aten::log_softmax:
        break;
      case c10::aten::unsqueeze: {
        std::optional<int64_t> d = intOf(in[1]);
        if (!d || !(d = normDim(*d, x.size() + 1))) return;
        out.insert(out.begin() + *d, Axis{1, false});
        break;
      }
      case c10::aten::select: {
        std::optional<int64_t> d = intOf(in[1]);
        if (!d || !(d = normDim(*d, x.size()))) return;
        out.erase(out.begin() + *d);
        break;
      }
      case c10::aten::slice: {
        std::optional<int64_t> d = in.size() == 5 ? intOf(in[1]) : std::nullopt;
        if (!d || !(d = normDim(*d, x.size()))) return;
        std::optional<Bound> start = boundOf(in[2]), end = boundOf(in[3]);
        std::optional<int64_t> step = intOf(in[4]);
        out[*d] = start && end && step ? sliced(x[*d], *start, *end, *step) : Axis{};
        break;
      }
      case c10::aten::t:
        if (x.size() == 2) std::swap(out[0], out[1]);
        break;
      case c10::aten::numpy_T:  // x.T
        std::reverse(out.begin(), out.end());
        break;
      case c10::aten::mT:
        if (x.size() >= 2) std::swap(out[x.size() - 2], out[x.size() - 1]);
        break;
      case c10::aten::transpose: {
        std::optional<int64_t> a = intOf(in[1]), b = intOf(in[2]);
        if (!a || !b || !(a = normDim(*a, x.size())) || !(b = normDim(*b, x.size()))) return;
        std::swap(out[*a], out[*b]);
        break;
      }
      case c10::aten::permute: {
        std::optional<std::vector<int64_t>> p = sizesOf(in[1]);
        if (!p || p->size() != x.size()) return;
        for (size_t k = 0; k < p->size(); ++k) {
          std::optional<int64_t> d = normDim((*p)[k], x.size());
          if (!d) return;
          out[k] = x[*d];
        }
        break;
      }
      case c10::aten::view:
      case c10::aten::reshape: {
        std::optional<std::vector<int64_t>> sizes = sizesOf(in[1]);
        if (!sizes) return;
        out.clear();
        for (int64_t s : *sizes) out.push_back({s < 0 ? kUnknown : s, false});
        break;
      }
      case c10::aten::expand:
      case c10::aten::repeat: {
        std::optional<std::vector<int64_t>> amounts = sizesOf(in[1]);
        if (!amounts || amounts->size() < x.size()) return;
        out = stretched(x, *amounts, n->kind() == c10::aten::repeat);
        break;
      }
      case c10::aten::expand_as: {
        const Shape* like = shapeOf(in[1]);
        if (!like) return;
        std::vector<const Shape*> both{&x, like};
        out = broadcast(both);
        for (size_t i = 0; i < out.size(); ++i)
          if (flat(x, i) && !flat(*like, i)) out[out.size() - 1 - i].stretched = true;
        break;
      }
      case c10::aten::size:
        if (in.size() == 2) {
          std::optional<int64_t> d = intOf(in[1]);
          if (d && (d = normDim(*d, x.size())) && x[*d].size != kUnknown) values_[n->output()] = x[*d].size;
        } else if (std::all_of(x.begin(), x.end(), [](const Axis& a) { return a.size != kUnknown; })) {
          std::vector<int64_t> sizes;
          for (const Axis& a : x) sizes.push_back(a.size);
          values_[n->output()] = c10::IValue(sizes);
        }
        return;
      default:
        return;
    }
    shapes_[n->output()] = std::move(out);
  }

  // A slice bound: nullopt for None (the default), else its value.
  using Bound = std::optional<int64_t>;
  // nullopt where the bound is neither None nor a known int.
  std::optional<Bound> boundOf(Value* v) const {
    std::optional<c10::IValue> iv = valueOf(v);
    if (iv && iv->isNone()) return Bound{};
    if (iv && iv->isInt()) return Bound{iv->toInt()};
    return std::nullopt;
  }

  // expand(x, sizes) or repeat(x, counts). A size-1 axis stretched or repeated to more holds one
  // value throughout: flat, as a broadcast operand is.
  static Shape stretched(const Shape& x, const std::vector<int64_t>& amounts, bool repeat) {
    Shape out(amounts.size());
    for (size_t i = 0; i < amounts.size(); ++i) {
      const Axis was = i < x.size() ? x[x.size() - 1 - i] : Axis{1, false};
      int64_t a = amounts[amounts.size() - 1 - i];
      if (!repeat && a == -1 && i < x.size()) a = was.size;  // expand's -1 keeps the axis
      const bool known = a >= 0 && (!repeat || was.size != kUnknown);
      out[amounts.size() - 1 - i] = {known ? (repeat ? was.size * a : a) : kUnknown,
                                     was.stretched || (was.size == 1 && a != 1)};
    }
    return out;
  }

  // The axis x[start:end:step] leaves. A constant window bounds it even where the size is not
  // known (`boxes[:, 3:4]` is one wide).
  static Axis sliced(const Axis& a, Bound start, Bound end, int64_t step) {
    if (step <= 0) return {};
    int64_t s = start.value_or(0), e = end.value_or(kOpenEnd);
    if (s == 0 && e >= kOpenEnd && step == 1) return a;
    if (a.size != kUnknown) {
      auto clampToSize = [&](int64_t v) { return std::clamp(v < 0 ? v + a.size : v, int64_t{0}, a.size); };
      s = clampToSize(s);
      e = e >= kOpenEnd ? a.size : clampToSize(e);
    } else if (s < 0 || e < 0 || e >= kOpenEnd) {
      return {};
    }
    if (s == 0 && e == a.size && step == 1) return a;
    return {std::max<int64_t>(0, (e - s + step - 1) / step), false};
  }
};

}  // namespace

bool outerProduct(c10::IntArrayRef a, c10::IntArrayRef b) {
  auto shape = [](c10::IntArrayRef sizes) {
    Shape s;
    for (int64_t n : sizes) s.push_back({n, false});
    return s;
  };
  const Shape sa = shape(a), sb = shape(b);
  return outerProduct(std::vector<const Shape*>{&sa, &sb});
}

Node* firstBroadcastCandidate(const std::shared_ptr<Graph>& graph, c10::ArrayRef<c10::IValue> inputs) {
  Probe probe;
  const auto params = graph->inputs();
  for (size_t i = 0; i < params.size() && i < inputs.size(); ++i) probe.bind(params[i], inputs[i]);
  return probe.scan(graph->block());
}

}  // namespace tsfuse
