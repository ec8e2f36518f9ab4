#include "kernels/reference/analysis.h"

#include "common/text_cache.h"

#include "kernels/ir/op_registry.h"
#include "kernels/reference/operand_device.h"

#include "tsfuse/log.h"

#include <ATen/ExpandUtils.h>
#include <ATen/WrapDimUtils.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <numeric>

namespace tsfuse {
namespace {

// Whether sizes has more than INT64_MAX elements (eager cannot allocate it: it raises).
bool numelOverflows(at::IntArrayRef sizes) {
  int64_t n = 1;
  for (int64_t s : sizes)
    if (__builtin_mul_overflow(n, s, &n)) return true;
  return false;
}

// A CPU stand-in of `t`: same dtype, rank, wrapped-number status and stride order; sizes 1, 2
// or 0; filled with ones.
at::Tensor standIn(const at::Tensor& t) {
  auto opts = at::TensorOptions().dtype(t.scalar_type());
  if (t.dim() == 0) {
    at::Tensor s = at::ones({}, opts);
    if (t.unsafeGetTensorImpl()->is_wrapped_number()) s.unsafeGetTensorImpl()->set_wrapped_number(true);
    return s;
  }
  std::vector<int64_t> sizes;
  for (int64_t s : t.sizes()) sizes.push_back(s <= 1 ? s : 2);
  // The real strides themselves, so TensorIterator sees the same ties; they need a storage of
  // 1 + sum(stride) elements at most (bounded below), else a dense layout in the same order.
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) span += (sizes[d] > 1) ? t.stride(d) : 0;
  if (span <= (int64_t(1) << 16)) return at::ones({span}, opts).as_strided(sizes, t.strides());
  at::Tensor s = at::empty_strided(sizes, denseStrides(sizes, strideOrder(t.sizes(), t.strides())), opts);
  return s.fill_(1);
}

// The dtype an instruction's tensor and scalar operands are converted to before it computes.
c10::ScalarType computeTypeOf(const Instr& ins, const at::Tensor& result, const std::vector<at::Tensor>& values,
                              at::TensorList inputs) {
  auto operand = [&](size_t k) -> at::Tensor {
    const Arg& a = ins.args[k];
    if (a.kind == Arg::Kind::Input) return inputs[a.i];
    if (a.kind == Arg::Kind::Value) return values[a.i];
    return wrappedLiteral(a, c10::kCPU);
  };
  const OpDef& def = opDef(ins.op);
  if (def.has(kCompare)) return at::result_type(operand(0), operand(1));
  if (def.has(kLogical)) return c10::ScalarType::Bool;
  return result.scalar_type();
}

// Casts that name a device (to_device's constant, to_other's prototype) are the plain cast on the
// call's device `device` alone, where the native paths run them: elsewhere eager moves the value,
// which only the eager path does. Throws there, and where a prototype is not a 0-dim strided
// tensor (its shape would broadcast, its layout convert). Returns `e` with each to_device as `to`,
// for the stand-ins, which live on the CPU whatever the call's device.
Expr castsOn(const Expr& e, at::TensorList operands, c10::Device device) {
  Expr out = e;
  for (Instr& ins : out.instrs) {
    if (ins.op == Op::ToOther) {
      const at::Tensor& p = operands[ins.args[1].i];
      TORCH_CHECK(p.dim() == 0 && p.layout() == c10::kStrided && p.device() == device,
                  "tsfuse: to_other's prototype is not a 0-dim strided tensor on ", device);
    }
    if (ins.op != Op::ToDevice) continue;
    TORCH_CHECK(ins.args[1].device == device, "tsfuse: to(", ins.args[1].device, ") of a value on ", device);
    ins = Instr{Op::To, {ins.args[0], ins.args[2]}};
  }
  return out;
}

bool castsToADevice(const Expr& e) {
  return std::any_of(e.instrs.begin(), e.instrs.end(),
                     [](const Instr& ins) { return ins.op == Op::ToDevice || ins.op == Op::ToOther; });
}

// Shapes (instruction by instruction, from the real sizes; literals are 0-dim) and dtypes (from
// the stand-ins) of `e` over `operands`; fills resultType, computeType, shape and valueShape and
// returns every instruction's stand-in value. Throws where eager would.
std::vector<at::Tensor> analyzeExpr(const Expr& e, at::TensorList operands, at::TensorList small, Analysis& a,
                                    c10::Device device) {
  const std::vector<at::DimVector> shapes = instructionShapes(e, operands);
  at::DimVector all;
  for (const auto& t : operands) all = at::infer_size_dimvector(all, t.sizes());
  // NB: element counts below (tiles, slabs, accumulators) are int64: a shape they cannot count
  // goes to eager (analyze() returns none), which raises (it materialises the intermediate) or
  // computes it.
  for (const auto& s : shapes)
    TORCH_CHECK(!numelOverflows(s), "tsfuse: an intermediate of shape ", at::IntArrayRef(s),
                " has more elements than int64 can count");
  TORCH_CHECK(!numelOverflows(all), "tsfuse: the broadcast shape ", at::IntArrayRef(all),
              " has more elements than int64 can count");
  a.shape.assign(all.begin(), all.end());
  a.valueShape.assign(shapes.back().begin(), shapes.back().end());
  std::vector<at::Tensor> values =
      castsToADevice(e) ? evalAtenAll(castsOn(e, operands, device), small) : evalAtenAll(e, small);
  for (size_t k = 0; k < e.instrs.size(); ++k) {
    a.resultType.push_back(values[k].scalar_type());
    a.computeType.push_back(computeTypeOf(e.instrs[k], values[k], values, small));
  }
  return values;
}

// The epilogue over the reduced value (`reduced`, its stand-in `reducedSmall`): sets the final
// output of `a`.
void analyzeEpilogue(const Expr& epi, const at::Tensor& reducedSmall, at::TensorList epiOps, Analysis& a,
                     c10::Device device) {
  auto ea = std::make_shared<Analysis>();
  // The real-size operands only need sizes: an undefined-data stand-in of the reduced value.
  std::vector<at::Tensor> real{at::empty(a.reducedSizes, at::TensorOptions().dtype(a.reducedDtype).device(c10::kMeta))};
  std::vector<at::Tensor> small{reducedSmall};
  for (const auto& t : epiOps) {
    real.push_back(t);
    small.push_back(standIn(t));
  }
  std::vector<at::Tensor> values = analyzeExpr(epi, real, small, *ea, device);
  const at::Tensor& v = values.back();
  ea->outSizes = ea->valueShape;
  ea->outDtype = v.scalar_type();
  ea->outStrides = denseStrides(ea->outSizes, strideOrder(v.sizes(), v.strides()));
  a.outSizes = ea->outSizes;
  a.outStrides = ea->outStrides;
  a.outDtype = ea->outDtype;
  a.epilogueKeepsShape = ea->valueShape == a.reducedSizes && ea->shape == a.reducedSizes;
  a.epilogue = std::move(ea);
}

}  // namespace

// Dims ordered outermost-first by stride. On a tie a size-1 dim is the inner one: a dense layout
// gives a size-1 dim the stride of the dims inside it, so it shares its stride with the next
// outer dim (eager: sizes [6, 1, 3] -> strides [1, 6, 6]).
std::vector<int64_t> strideOrder(at::IntArrayRef sizes, at::IntArrayRef strides) {
  std::vector<int64_t> order(strides.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    if (strides[a] != strides[b]) return strides[a] > strides[b];
    return sizes[a] != 1 && sizes[b] == 1;
  });
  return order;
}

// Dense strides for `sizes` laid out in `order` (outermost first).
std::vector<int64_t> denseStrides(at::IntArrayRef sizes, const std::vector<int64_t>& order) {
  std::vector<int64_t> strides(sizes.size(), 1);
  int64_t step = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = step;
    step *= sizes[*it];
  }
  return strides;
}

at::TensorList mainOperands(const Expr& e, at::TensorList operands) {
  return operands.slice(0, std::min<size_t>(operands.size(), e.numInputs));
}
at::TensorList epilogueOperands(const Expr& e, at::TensorList operands) {
  return operands.slice(std::min<size_t>(operands.size(), e.numInputs));
}

at::Tensor Analysis::allocIndices(c10::Device device) const {
  return at::empty_strided(outSizes, outStrides, at::TensorOptions().dtype(at::kLong).device(device));
}

int64_t Analysis::outNumel() const {
  int64_t n = 1;
  for (int64_t s : outSizes) n *= s;
  return n;
}

int64_t Analysis::valueNumel() const {
  int64_t n = 1;
  for (int64_t s : valueShape) n *= s;
  return n;
}

at::Tensor Analysis::allocOut(c10::Device device) const {
  if (donated.defined() && donated.device() == device) return donated;
  return at::empty_strided(outSizes, outStrides, at::TensorOptions().dtype(outDtype).device(device));
}

std::optional<Analysis> analyze(const Expr& e, at::TensorList operands, const ReduceSpec* reduce) {
  Analysis a;
  try {
    at::TensorList ops = mainOperands(e, operands);
    std::vector<at::Tensor> small;
    small.reserve(ops.size());
    for (const auto& t : ops) small.push_back(standIn(t));
    const c10::Device device = mainDevice(operands);
    std::vector<at::Tensor> values = analyzeExpr(e, ops, small, a, device);
    const int64_t R = static_cast<int64_t>(a.valueShape.size());
    a.valueOrder = strideOrder(values.back().sizes(), values.back().strides());
    if (!reduce) {
      a.outSizes = a.valueShape;
      a.outDtype = values.back().scalar_type();
      a.outStrides = denseStrides(a.outSizes, strideOrder(values.back().sizes(), values.back().strides()));
      return a;
    }
    at::Tensor r = applyReductionAll(*reduce, values.back())[0];
    a.outDtype = r.scalar_type();
    std::vector<int64_t> rdims = reducedDims(*reduce, R);
    int64_t count = 1;
    for (int64_t d = 0; d < R; ++d) {
      bool reduced = std::binary_search(rdims.begin(), rdims.end(), d);
      if (reduced) count *= a.valueShape[d];
      if (!reduced)
        a.outSizes.push_back(a.valueShape[d]);
      else if (reduce->keepdim)
        a.outSizes.push_back(1);
    }
    bool needsElement = reduce->kind == Reduction::Amax || reduce->kind == Reduction::Amin ||
                        reduce->kind == Reduction::Argmax || reduce->kind == Reduction::Argmin || reduce->withIndices();
    if (count == 0 && needsElement) return std::nullopt;  // eager raises: no identity
    TORCH_CHECK(static_cast<int64_t>(a.outSizes.size()) == r.dim(), "tsfuse: reduction rank mismatch");
    a.outStrides = denseStrides(a.outSizes, strideOrder(r.sizes(), r.strides()));
    a.reducedSizes = a.outSizes;
    a.reducedDtype = a.outDtype;
    if (reduce->epilogue) analyzeEpilogue(*reduce->epilogue, r, epilogueOperands(e, operands), a, device);
  } catch (const std::exception& err) {
    TSFUSE_LOG(kernel, debug, "analysis: eager would raise: ", err.what());
    return std::nullopt;
  }
  return a;
}

namespace {

// A call's signature as bytes (see analyzeCached), and the analysis it had. The entry holds the
// expressions whose addresses its key names, so no other expression can take those addresses
// while the entry lives.
struct SignedAnalysis {
  std::shared_ptr<const Expr> expr, epilogue;
  std::optional<Analysis> analysis;
};

void appendWord(std::string& key, int64_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); }
int64_t bitsOf(double v) {
  int64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

std::string signature(const Expr* e, at::TensorList operands, const ReduceSpec* reduce) {
  std::string key;
  key.reserve(64 + operands.size() * 64);
  appendWord(key, reinterpret_cast<intptr_t>(e));
  if (reduce) {
    appendWord(key, static_cast<int64_t>(reduce->kind));
    appendWord(key, reduce->keepdim);
    appendWord(key, reduce->dtype ? static_cast<int64_t>(*reduce->dtype) : -1);
    appendWord(key, bitsOf(reduce->p));
    appendWord(key, bitsOf(reduce->correction));
    appendWord(key, reinterpret_cast<intptr_t>(reduce->epilogue.get()));
    appendWord(key, reduce->dims ? static_cast<int64_t>(reduce->dims->size()) : -1);
    if (reduce->dims)
      for (int64_t d : *reduce->dims) appendWord(key, d);
  } else {
    appendWord(key, -1);
  }
  for (const at::Tensor& t : operands) {
    appendWord(key, static_cast<int64_t>(t.scalar_type()));
    appendWord(key, t.unsafeGetTensorImpl()->is_wrapped_number());
    appendWord(key, int64_t(t.device().type()) * 65536 + t.device().index() + 1);
    appendWord(key, t.dim());
    for (int64_t s : t.sizes()) appendWord(key, s);
    for (int64_t s : t.strides()) appendWord(key, s);
  }
  return key;
}

}  // namespace

std::optional<Analysis> analyzeCached(const std::shared_ptr<const Expr>& e, at::TensorList operands,
                                      const ReduceSpec* reduce) {
  static TextCache<SignedAnalysis> cache(4096);
  auto entry = cache.get(signature(e.get(), operands, reduce), [&] {
    return SignedAnalysis{e, reduce ? reduce->epilogue : nullptr, analyze(*e, operands, reduce)};
  });
  return entry->analysis;
}

std::shared_ptr<const Expr> cachedExpr(const std::string& text) {
  static TextCache<Expr> cache(4096);
  return cache.get(text, [&] { return Expr::parse(text); });  // throws on malformed text
}

std::optional<std::vector<int64_t>> cpuSpace(at::TensorList operands) {
  std::vector<int64_t> space;
  for (const at::Tensor& t : operands) {
    if (!t.defined() || !t.device().is_cpu()) return std::nullopt;
    space = space.empty() ? t.sizes().vec() : at::infer_size(space, t.sizes());
  }
  return space;
}

std::vector<at::DimVector> instructionShapes(const Expr& e, at::TensorList operands) {
  std::vector<at::DimVector> shapes;
  for (const Instr& ins : e.instrs) {
    at::DimVector s;
    for (const Arg& arg : ins.args) {
      if (arg.kind == Arg::Kind::Input) s = at::infer_size_dimvector(s, operands[arg.i].sizes());
      if (arg.kind == Arg::Kind::Value) s = at::infer_size_dimvector(s, shapes[arg.i]);
    }
    shapes.push_back(std::move(s));
  }
  return shapes;
}

std::vector<int64_t> reducedDims(const ReduceSpec& r, int64_t rank) {
  std::vector<int64_t> dims;
  if (rank == 0) return dims;  // a 0-dim value's dim 0 (or -1), which ATen accepts, is no dim
  if (!r.dims || r.dims->empty()) {
    for (int64_t d = 0; d < rank; ++d) dims.push_back(d);
    return dims;
  }
  for (int64_t d : *r.dims) dims.push_back(at::maybe_wrap_dim(d, rank));
  std::sort(dims.begin(), dims.end());
  dims.erase(std::unique(dims.begin(), dims.end()), dims.end());
  return dims;
}

}  // namespace tsfuse
