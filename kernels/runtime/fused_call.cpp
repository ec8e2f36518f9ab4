#include "kernels/runtime/fused_call.h"

#include "kernels/runtime/bind_numbers.h"
#include "kernels/runtime/hoist.h"

#include "tsfuse/log.h"
#include "tsfuse/ops.h"

#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>

namespace tsfuse {

namespace {

// The elements an operand's memory holds: a dim it broadcasts with stride 0 (an expanded view,
// e.g. a repeat read as a broadcast: passes/regions/region.h) holds one.
int64_t footprint(const at::Tensor& t) {
  int64_t n = 1;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.stride(d) != 0 || t.size(d) == 0) n *= t.size(d);
  return n;
}

thread_local const void* tlsLastDonated = nullptr;

std::atomic<bool>& keepOrderState() {
  static std::atomic<bool> on = [] {
    const char* v = std::getenv("TSFUSE_REDUCE_ORDER");
    return !(v && std::string(v) == "any");
  }();
  return on;
}

}  // namespace

int64_t largestFootprint(at::TensorList operands) {
  int64_t largest = 0;
  for (const at::Tensor& t : operands) largest = std::max<int64_t>(largest, footprint(t));
  return largest;
}

bool broadcastsBeyondOperands(const Analysis& an, at::TensorList operands) {
  return an.valueNumel() > largestFootprint(operands);
}

bool keepsEagerOrder() { return keepOrderState().load(std::memory_order_relaxed); }
void setKeepEagerOrder(bool on) { keepOrderState().store(on, std::memory_order_relaxed); }

Outputs runEagerAll(const Expr& e, at::TensorList operands, const ReduceSpec* reduce) {
  setLastPath("eager");
  return evalFused(e, operands, reduce);
}

at::Tensor runEager(const Expr& e, at::TensorList operands, const ReduceSpec* reduce) {
  return runEagerAll(e, operands, reduce)[0];
}

ReduceSpec makeReduceSpec(c10::string_view reduction, at::OptionalIntArrayRef dim, bool keepdim,
                          std::optional<c10::ScalarType> dtype, std::optional<c10::string_view> epilogue) {
  ReduceSpec r;
  std::string text(reduction), name = text.substr(0, text.find(':'));
  TORCH_CHECK(reductionFromName(name, r.kind), "tsfuse::reduce: unknown reduction '", reduction,
              "' (sum, mean, prod, amax, amin, any, all, argmax, argmin, logsumexp, norm:<p>, var:<correction>, "
              "std:<correction>, max, min)");
  // norm's order and var/std's correction follow a colon; without one they take torch's defaults.
  const bool takesParam = r.kind == Reduction::Norm || r.variance();
  if (takesParam && name.size() < text.size()) {
    const std::string p = text.substr(name.size() + 1);
    char* stop = nullptr;
    const double value = std::strtod(p.c_str(), &stop);
    TORCH_CHECK(!p.empty() && stop == p.c_str() + p.size(), "tsfuse::reduce: malformed ",
                r.kind == Reduction::Norm ? "norm order" : "correction", " in '", reduction, "'");
    (r.kind == Reduction::Norm ? r.p : r.correction) = value;
  } else {
    TORCH_CHECK(name.size() == text.size(), "tsfuse::reduce: only norm, var and std take a parameter, got '",
                reduction, "'");
  }
  // An out-of-range ScalarType (e.g. an int from TorchScript) would index ATen's dtype tables.
  TORCH_CHECK(!dtype || (static_cast<int>(*dtype) >= 0 && *dtype < c10::ScalarType::NumOptions),
              "tsfuse::reduce: dtype ", static_cast<int>(dtype ? *dtype : c10::ScalarType::Undefined),
              " is not a ScalarType");
  if (dim) r.dims = dim->vec();
  r.keepdim = keepdim;
  r.dtype = dtype;
  if (epilogue) r.epilogue = cachedExpr(std::string(*epilogue));
  return r;
}

ReduceSpec makeIndicesSpec(c10::string_view reduction, int64_t dim, bool keepdim,
                           std::optional<c10::string_view> epilogue) {
  ReduceSpec spec = makeReduceSpec(reduction, std::vector<int64_t>{dim}, keepdim, std::nullopt, epilogue);
  TORCH_CHECK(spec.withIndices(), "tsfuse::reduce_with_indices: reduction must be max or min, got '",
              reduction, "'");
  return spec;
}

at::Tensor runFused(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce,
                    const NativePath& native, at::IntArrayRef donated) {
  return runFusedAll(operands, exprText, reduce, native, donated)[0];
}

const void* lastDonatedMemory() { return tlsLastDonated; }

namespace {

// An operand list a call hands on to the call it makes (bound numbers: kernels/runtime/bind_numbers.h;
// hoisting: kernels/runtime/hoist.h), while that call runs on this thread: its handles are the outer call's
// own, so a donated operand may be held by them too (by each list of a nested hand-on).
class HandedOnOperands {
 public:
  explicit HandedOnOperands(const std::vector<at::Tensor>& ops) : ops_(ops), previous_(tls_) { tls_ = this; }
  ~HandedOnOperands() { tls_ = previous_; }
  HandedOnOperands(const HandedOnOperands&) = delete;
  HandedOnOperands& operator=(const HandedOnOperands&) = delete;
  static long handles(const at::Tensor& t) {
    long n = 0;
    for (const HandedOnOperands* list = tls_; list; list = list->previous_)
      for (const at::Tensor& o : list->ops_) n += o.is_same(t);
    return n;
  }

 private:
  const std::vector<at::Tensor>& ops_;
  const HandedOnOperands* previous_;
  static thread_local const HandedOnOperands* tls_;
};
thread_local const HandedOnOperands* HandedOnOperands::tls_ = nullptr;

// The tensors that own t's storage when nothing but t can reach it: t, and the base of a view
// (e.g. torch.cdist's result) that only t's view record still holds.
long storageOwners(const at::Tensor& t) {
  return t.is_view() && t._base().use_count() == 1 ? 2 : 1;
}

// Memory that ATen's allocator for the tensor's device (the CPU's, CUDA's caching allocator) gave,
// and frees when its storage dies: no one outside the reference counts can hold it (unlike
// from_blob's, e.g. an application's image buffer).
bool allocatedByAten(const at::Tensor& t) {
  const c10::Allocator* allocator = c10::GetAllocator(t.device().type());
  const c10::DeleterFnPtr atens = allocator ? allocator->raw_deleter() : nullptr;
  return atens != nullptr && t.storage().data_ptr().get_deleter() == atens;
}

}  // namespace

at::Tensor takeDonated(at::TensorList operands, at::IntArrayRef donated, const Analysis& an) {
  for (int64_t i : donated) {
    const at::Tensor& t = operands.at(i);
    // Every path reads an operand element before it writes the output element at the same place:
    // CPU tiles load before they store, a CUDA kernel's thread loads what it stores from (an
    // operand laid out as the output is read where it is written, by the same thread), and the
    // chunked path computes a slab before copying it. Other devices' paths are not known.
    std::string why;
    if (!(t.is_cpu() || t.is_cuda()) || t.layout() != at::kStrided || t.is_conj() || t.is_neg() ||
        t.requires_grad() || t.unsafeGetTensorImpl()->is_wrapped_number()) {
      why = "not a plain CPU or CUDA tensor";  // a wrapped number would make the output one too
    } else if (t.scalar_type() != an.outDtype || t.sizes() != at::IntArrayRef(an.outSizes) ||
               t.strides() != at::IntArrayRef(an.outStrides) || !t.is_non_overlapping_and_dense()) {
      why = "not laid out as the output";
    } else if (t.use_count() > kCallReferences + HandedOnOperands::handles(t) || !t.has_storage() ||
               static_cast<long>(t.storage().use_count()) != storageOwners(t)) {
      why = c10::str("held elsewhere (", t.use_count(), " handles, its storage by ",
                     t.has_storage() ? t.storage().use_count() : 0, " tensors)");
    } else if (!allocatedByAten(t)) {
      why = "its memory is not ATen's own (from_blob)";
    } else {
      return t;
    }
    TSFUSE_LOG(kernel, debug, "donated operand ", i, " not taken: ", why);
  }
  return at::Tensor();
}

void checkOperandsDefined(at::TensorList operands) {
  for (size_t i = 0; i < operands.size(); ++i)
    TORCH_CHECK(operands[i].defined(), "tsfuse: operand ", i, " is an undefined tensor");
}

std::shared_ptr<const Expr> checkedExpr(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce) {
  std::shared_ptr<const Expr> e = cachedExpr(std::string(exprText));
  checkFusedOperandCount(*e, reduce, operands.size());
  checkOperandsDefined(operands);
  return e;
}

at::Tensor shapeOf(at::TensorList operands, c10::string_view exprText) {
  std::shared_ptr<const Expr> e = checkedExpr(operands, exprText, nullptr);
  if (auto bound = bindNumbers(e, nullptr, operands)) return shapeOf(bound->operands, bound->text);
  auto device = commonDevice(operands);
  std::optional<Analysis> an;
  if (device) an = analyzeCached(e, operands, nullptr);
  if (!an) return runEager(*e, operands, nullptr);  // raises eager's error (or computes)
  return at::empty({}, at::TensorOptions().dtype(an->outDtype).device(*device)).expand(an->outSizes);
}

Outputs runFusedAll(at::TensorList operands, c10::string_view exprText, const ReduceSpec* reduce,
                    const NativePath& native, at::IntArrayRef donated) {
  std::shared_ptr<const Expr> e = checkedExpr(operands, exprText, reduce);
  std::vector<int64_t> mainDonated;  // for a call on the expression's own operands only
  for (int64_t i : donated) {
    TORCH_CHECK(i >= 0 && i < static_cast<int64_t>(operands.size()), "tsfuse: donated operand ", i,
                " out of range for ", operands.size(), " operands");
    if (i < e->numInputs) mainDonated.push_back(i);
  }
  if (!donated.empty()) tlsLastDonated = nullptr;
  // The donated operands' places in a call handed on (-1 in `position`: no longer read).
  auto moved = [&](const std::vector<int64_t>& position) {
    std::vector<int64_t> out;
    for (int64_t i : donated)
      if (position[i] >= 0) out.push_back(position[i]);
    return out;
  };
  if (auto bound = bindNumbers(e, reduce, operands)) {
    // Numbers the program reads by value, written in as literals (kernels/runtime/bind_numbers.h).
    const HandedOnOperands held(bound->operands);
    return runFusedAll(bound->operands, bound->text, bound->reduce ? &*bound->reduce : nullptr, native,
                       moved(bound->position));
  }
  if (reduce && reduce->withIndices() && reduce->epilogue) {
    // Max/min with indices, then the epilogue as one fused elementwise call over (values,
    // indices, its operands) whose value takes the indices' place, in their memory where it can
    // (anchor matching's `where(vals < t, -1, idx)`: both outputs of one op, nothing extra held).
    ReduceSpec plain = *reduce;
    plain.epilogue.reset();
    Outputs r = runFusedAll(mainOperands(*e, operands), exprText, &plain, native, mainDonated);
    const char* path = lastPath();
    const bool readsIndices = reduce->epilogue->numInputs >= 2;  // then they are its operand 1, donated
    std::vector<at::Tensor> ops =
        indicesEpilogueOperands(*reduce, r[0], std::move(r[1]), epilogueOperands(*e, operands));
    r[1] = runFusedAll(ops, reduce->epilogue->str(), nullptr, native,
                       readsIndices ? std::vector<int64_t>{1} : std::vector<int64_t>{})[0];
    setLastPath(path);
    return r;
  }
  auto device = commonDevice(operands);
  if (!device) return runEagerAll(*e, operands, reduce);  // raises eager's device error
  // Costly work over fewer dims than the call's space, once at its own shape (kernels/runtime/hoist.h).
  std::optional<Hoisted> hoisted;
  try {
    hoisted = hoistNarrowWork(*e, operands);
  } catch (const c10::Error&) {
    // (operands that do not broadcast, or an op that raises: the call below raises eager's error)
  }
  if (hoisted) {
    const HandedOnOperands held(hoisted->operands);
    return runFusedAll(hoisted->operands, hoisted->expr, reduce, native, moved(hoisted->position));
  }
  auto an = analyzeCached(e, operands, reduce);
  if (!an) return runEagerAll(*e, operands, reduce);  // raises eager's error (or computes)
  if (an->outNumel() == 0) {
    // Nothing to compute, and every intermediate is empty too: eager gives the exact layout.
    Outputs out = runEagerAll(*e, operands, reduce);
    setLastPath("empty");
    return out;
  }
  // A reduction's epilogue as one fused elementwise call after it, over the reduced value (this
  // call's own, moved into the operand list: nothing else holds it, so the output may take it).
  auto epilogueOver = [&](at::Tensor reduced) {
    std::vector<at::Tensor> ops;
    ops.push_back(std::move(reduced));
    for (const auto& t : epilogueOperands(*e, operands)) ops.push_back(t);
    return runFusedAll(ops, reduce->epilogue->str(), nullptr, native, std::vector<int64_t>{0})[0];
  };
  if (reduce && reduce->epilogue && !an->epilogueKeepsShape) {
    // The epilogue broadcasts the reduced value to a larger shape (x_norm + y_norm.T - 2 * x @ y.T):
    // the reduction (fused, or ATen's by the do-no-harm rule below, which the inner call applies),
    // then the epilogue as one fused elementwise call over the reduced value and its other
    // operands, so the epilogue's broadcast intermediates are never stored either.
    TSFUSE_LOG(kernel, debug, "epilogue grows the reduced shape; it runs after the reduction");
    ReduceSpec plain = *reduce;
    plain.epilogue.reset();
    Outputs r = runFusedAll(mainOperands(*e, operands), exprText, &plain, native, mainDonated);
    const char* path = lastPath();
    r[0] = epilogueOver(std::move(r[0]));
    setLastPath(path);
    return r;
  }
  if (reduce && keepsEagerOrder() && reduce->roundsByOrder(an->resultType.back()) &&
      !broadcastsBeyondOperands(*an, mainOperands(*e, operands))) {
    // Do no harm: folding in another order than eager changes a float result's bits, which only
    // buys something when the value being reduced is a broadcast intermediate larger than every
    // operand. Here it is not (e.g. `x.pow(2).sum(-1)` over one [N, D] tensor), so ATen reduces
    // the value exactly as the unfused graph did. The value itself comes from the fused
    // elementwise path (eager's bits and layout, its intermediates never stored): the call then
    // holds the operands and the value, where evaluating op by op would also hold the last
    // intermediate while the operand list keeps the operands alive (gp.PeriodicKernel: one
    // [D, N, M] more than the unfused graph, which frees a dead operand after its first reader),
    // unless a donated operand takes the value (then it holds as much as the unfused graph).
    // The epilogue then runs over the reduced value, in its memory.
    at::Tensor value = runFusedAll(mainOperands(*e, operands), exprText, nullptr, native, mainDonated)[0];
    ReduceSpec plain = *reduce;
    plain.epilogue.reset();
    Outputs out = reduceWithAten(*e, operands, plain, std::move(value));
    if (reduce->epilogue) out[0] = epilogueOver(std::move(out[0]));
    setLastPath("aten");
    return out;
  }
  if (!reduce && !donated.empty()) an->donated = takeDonated(operands, donated, *an);
  // Whether the output did take the donated operand (the chunked path's single slab does not).
  auto noteDonation = [&](Outputs out) {
    if (an->donated.defined() && out[0].is_same(an->donated)) {
      tlsLastDonated = out[0].data_ptr();
      TSFUSE_LOG(kernel, debug, "output written over a donated operand: ", exprText);
    }
    return out;
  };
  // Data pointers only where a native path reads them (no other device need have any).
  const IterationPlan plan = IterationPlan::make(*e, operands, reduce, *an, /*bindData=*/bool(native));
  if (native) {
    std::string why;
    Outputs out = native(*e, operands, reduce, *an, plan, &why);
    if (!out.empty()) {
      setLastPath("native");
      return noteDonation(std::move(out));
    }
    TSFUSE_LOG(kernel, debug, "native path declined (", why, "); chunked ATen path for ", exprText);
  }
  setLastPath("chunked");
  return noteDonation(runChunked(*e, operands, reduce, *an, plan));
}

}  // namespace tsfuse
