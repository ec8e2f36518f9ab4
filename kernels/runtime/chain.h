// tsfuse::reduce_chain: reductions inside a fused op. Stage 0 is a tsfuse::reduce (an elementwise
// expression, a reduction, an epilogue); each later stage reduces, normalizes or (fused) computes
// over the previous value again. exp(-((x[:, None] - y[None]) ** 2).sum(-1) * 2).mul(b).sum(1):
//     expr    v1: sub($0, $1); mul(%0, %0)                       over [N, M, D]
//     stage 0 sum(dim=[2], keepdim=False) |> v1: mul($0, -2.0); exp(%0); mul(%1, $1)
//     stage 1 sum(dim=[1], keepdim=False)                        -> [N]
// The stages run slab by slab along a dim every stage keeps (N): stage 0's fused kernel stores its
// [slab, M] value in scratch of about chainSlabElements() elements, and later stages are ATen's
// over it, so they fold exactly as eager does. Nothing larger than a slab is ever stored.
#pragma once

#include "kernels/backends/native_path.h"

namespace tsfuse {

// How a call is cut into slabs: the slab dim (the outermost dim of the expression's space, of
// extent > 1, that every stage keeps) as it sits in each space, and the slabs' size.
struct SlabPlan {
  std::vector<int64_t> pos;             // pos[0]: in the expression's space; pos[k + 1]: in stage k's value
  std::vector<int64_t> ranks;           // the same spaces' ranks
  std::vector<int64_t> inPos, inRanks;  // in fused stage k's expression space (-1 for other stages)
  std::vector<int64_t> finalSizes;
  c10::ScalarType finalDtype = c10::ScalarType::Undefined;
  int64_t extent = 0, step = 0;  // step >= 1 (slabStep); the last slab may hold step + 1
};

struct ChainPlans;

// The input of a fused later stage: `expr` over the previous stage's value as operand `value`
// (after unsqueezing `unsqueeze`, in order) and the stage's own operands as the others, computed
// and reduced by the fused kernel on each slab as a tsfuse::reduce would over the stored value:
// "fused(v1: mul($0, $1); $0 = value.unsqueeze(2)) |> sum(dim=[1], keepdim=False)".
// `value` counts the fused call's operands, the expression's and then the epilogue's: at or past
// expr->numInputs the value is an operand of the stage's epilogue, a sibling reduction over the
// same kept dims that the epilogue combines with the stage's own (YOLOX's IoU: the overlap mask's
// product times the intersection's), "fused(v1: sub($0, $1); $2 = value) |> prod(dim=[2], ...)
// |> v1: mul($0, $1)".
struct StageInput {
  std::shared_ptr<const Expr> expr;
  std::string text;  // expr->str(), kept for the per-slab calls
  int64_t value = 0;
  std::vector<int64_t> unsqueeze;

  bool inEpilogue() const { return value >= expr->numInputs; }
  // The stage's own operands of the expression (the chain's inputOperands).
  size_t ownInputs() const { return static_cast<size_t>(expr->numInputs) - (inEpilogue() ? 0 : 1); }

  // "fused(<expr>; $<value> = value[.unsqueeze(d)...])", the text a stage starts with (then " |> ").
  std::string str() const;
  // The previous stage's value as the expression's operand.
  at::Tensor view(const at::Tensor& previous) const;
  // The stage's fused-call operands: the expression's (the viewed value as operand `value`, the
  // stage's input operands as the others), then the epilogue's.
  std::vector<at::Tensor> operands(const at::Tensor& previous, at::TensorList inputs, at::TensorList epilogue) const;
};

// A normalization along `dim` (wrapped to the value's rank at run time), with ATen's ops:
// softmax, log_softmax, or v / v.sum(dim, keepdim=True) ("softmax(dim=1)", "div_sum(dim=1)"). Only
// one along the value's last dim runs in slabs (of rows, which ATen computes each whole on one
// thread, so a slab's rows have eager's bits); along another dim eager's bits depend on how its
// threads split the value, and the chain runs in one piece.
struct NormalizeStage {
  enum class Kind : uint8_t { Softmax, LogSoftmax, DivSum };
  Kind kind = Kind::Softmax;
  int64_t dim = 0;

  // The stage over `value`, written into *out where one is given (a slab of the chain's output).
  at::Tensor apply(const at::Tensor& value, const at::Tensor* out = nullptr) const;
};

// Operands: the expression's, then stage 0's epilogue's ($1, $2, ... of the epilogue), then stage
// 1's (a fused stage's expression's other operands, then its epilogue's), and so on. Only the last
// stage may be max/min with indices (tsfuse::reduce_chain_with_indices, two outputs).
struct Chain {
  std::shared_ptr<const Expr> expr;
  // Each stage's reduction (a normalizing stage's is unused: ReduceSpec's defaults).
  std::vector<ReduceSpec> stages;
  // Whether stage k squeezes its input's size-1 dims before reducing (a traced `.squeeze()`
  // between the reductions; its text starts "squeeze() |> "). Never stage 0. A slab holds at least
  // two indices of the slab dim, so the slab's squeeze removes the same dims as the whole value's.
  std::vector<bool> squeezeFirst;
  // A fused stage's input (null: the stage is ATen's reduction of the previous value). Never stage 0.
  std::vector<std::shared_ptr<const StageInput>> input;
  // A normalizing stage (nullopt: a reduction). Never stage 0; takes no operands.
  std::vector<std::optional<NormalizeStage>> normalize;
  // Index of each stage's first operand (stage 0: the first after the expression's own).
  std::vector<size_t> firstOperand;
  size_t numOperands = 0;

  // The text of each stage (describe()) and the chain of such texts; throws c10::Error with the
  // stage and the reason when malformed.
  static Chain parse(c10::string_view expr, c10::ArrayRef<std::string> stages);
  std::vector<std::string> stageTexts() const;
  // Stage k's operands within the op's: a fused stage's expression's other operands (inputOperands),
  // then its epilogue's (epilogueOperands).
  at::TensorList inputOperands(at::TensorList operands, size_t k) const;
  at::TensorList epilogueOperands(at::TensorList operands, size_t k) const;
  // The call's slab plan (nullopt: one piece), cached per operand sizes and dtypes; raises where
  // a later stage would. `dim` >= 0: slabs along that dim of the expression's space only (nullopt
  // where a stage does not keep it).
  std::optional<SlabPlan> plan(at::TensorList operands, const Analysis& stage0, int64_t dim = -1) const;

 private:
  std::shared_ptr<ChainPlans> plans_;
};

// The cache key of an expression and its stages' texts.
std::string stagesKey(c10::string_view expr, c10::ArrayRef<std::string> stages);

// Parsed chains, cached by text (thread-safe, bounded).
std::shared_ptr<const Chain> cachedChain(c10::string_view expr, c10::ArrayRef<std::string> stages);

// The reference: stage by stage with ATen over whole values (autograd, Meta, error paths).
Outputs evalChain(const Chain& c, at::TensorList operands);

// The fused path: stage 0 and fused stages through `native` (the backend's runFusedAll), other
// later stages with ATen, slab by slab; eager's own error where eager would raise.
Outputs runChain(const Chain& c, at::TensorList operands, const NativePath& native);

// Later stage k over the previous stage's value: ATen's reduction of it, or a fused stage's input
// computed and reduced by `native` (the backend's runFusedAll; null: the reference, evalFused), or
// its normalization (written into `out` where one is given: a slab of the chain's output). `inputs`
// and `epilogue`: the stage's operands (inputOperands, epilogueOperands), or a slab of them.
Outputs laterStage(const Chain& c, size_t k, const at::Tensor& value, at::TensorList inputs, at::TensorList epilogue,
                   const NativePath* native, const at::Tensor* out = nullptr);

// Stage 0 over `ops0` (its operands, or a slab of them) by `native`. `narrowRows`: the slab cuts
// the value's innermost dim into rows narrower than a CPU tile (a kernel matrix's column sums,
// sliced along its columns: slicesIntoNarrowRows of the slab dim in the value, its rank and the
// slab step), where the compiled kernel would run the epilogue a narrow row at a time (an MKL call
// per row); the epilogue then runs once over the slab with ATen's ops, eager's bits as the fused
// epilogue's.
at::Tensor stageZero(const Chain& c, at::TensorList ops0, bool narrowRows, const NativePath& native);
bool slicesIntoNarrowRows(int64_t dim, int64_t rank, int64_t step);
// Slabs so far whose stage 0 epilogue ran over the whole slab (stageZero's narrow rows): tests
// check that the path ran.
int64_t slabEpiloguesAfterStageZero();

// A later stage over its input value: ATen's reduction (of the value squeezed first, where
// `squeeze`), then the epilogue's ATen ops over `extras` (the stage's epilogue operands).
Outputs applyStage(const ReduceSpec& spec, bool squeeze, const at::Tensor& value, at::TensorList extras);

// ATen's reduction `r` (no epilogue) of a stand-in of `sizes` with at most two elements per dim
// (no memory): eager's errors, and its result's dtype and rank.
at::Tensor reduceStandIn(const ReduceSpec& r, std::vector<int64_t> sizes, c10::ScalarType dtype);

// Where dim q of a space goes after reducing its dims `reduced` (sorted): -1 when q is reduced.
int64_t dimAfterReduction(int64_t q, const std::vector<int64_t>& reduced, bool keepdim);

// dimAfterReduction's inverse: the dim of a space of `rank` that lands at q after the reduction.
int64_t dimBeforeReduction(int64_t q, const std::vector<int64_t>& reduced, bool keepdim, int64_t rank);

// Whether stage 0's value is worth computing slab by slab: larger than the slab budget, of the
// expression's broadcast shape, with an epilogue (if any) that keeps it, not 0-dim.
bool worthSlicing(const Analysis& stage0, c10::Device device);

// The slab size for stage 0's value sliced along a dim of `extent` (`main`: the expression's own
// operands), and the slabs (start, length): `step` each, the last one longer rather than a lone
// index. At least two indices a slab, so that a slab's value broadcasts beyond its operands exactly
// when the whole value does and fused_call's do-no-harm rule decides alike for every slab; one
// where one index's value already holds more elements than any operand (a batch of [2048, 2048]
// distance matrices: one matrix a slab, 16 MiB of value instead of 32).
int64_t slabStep(const Analysis& stage0, at::TensorList main, int64_t extent, c10::Device device);
std::vector<std::pair<int64_t, int64_t>> slabRanges(int64_t extent, int64_t step);
// The dims of stage 0's expression space of extent > 1, in the order chains and sweeps try them as
// the slab dim: those of which two indices fit the slab budget first, then the others, each group
// outermost first (a batch of [2048, 2048] distance matrices is sliced along its rows, not its
// batch: a matrix a slab is read back by each later stage from memory, not cache).
std::vector<int64_t> slabDimOrder(const Analysis& stage0, c10::Device device);

// Runs f(begin, end) over the slabs [1, n) after the first: on torch's threads for a CPU call
// (each task a run of consecutive slabs); on the calling thread for a device's, whose kernels and
// copies must go to the caller's current stream (a worker thread's is the device's default one).
void forLaterSlabs(c10::Device device, int64_t n, const std::function<void(int64_t, int64_t)>& f);
// The same over the slabs [begin, end).
void forSlabs(c10::Device device, int64_t begin, int64_t end, const std::function<void(int64_t, int64_t)>& f);

// The most elements of stage 0's value one slab stores on the CPU (default kSlabElements / 2,
// 512 KiB of float32; a GPU's slabs are kDeviceSlabScale times larger); tests set it small to
// cover many slabs.
void setChainSlabElements(int64_t elements);
int64_t chainSlabElements(c10::Device device = c10::kCPU);

// CPU calls so far whose next stage, a sum of the value's last dim, was folded into stage 0 (each
// row summed as it is finished, the value never stored: chain.cpp, foldedRowSums); tests check
// that the fold ran or declined.
int64_t chainRowSumsFolded();

}  // namespace tsfuse
