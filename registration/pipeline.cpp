#include "registration/pipeline.h"

#include "passes/canonicalize.h"
#include "passes/count_bool_sums.h"
#include "passes/count_selected.h"
#include "passes/decompose.h"
#include "passes/chain_fused_reductions.h"
#include "passes/donate_operands.h"
#include "passes/framework/driver.h"
#include "passes/framework/events.h"
#include "passes/fold_upcast.h"
#include "passes/fuse_broadcast_reduce.h"
#include "passes/full_slice_checks.h"
#include "passes/fuse_pairwise.h"
#include "passes/fold_indices_epilogue.h"
#include "passes/hoist_into_epilogue.h"
#include "passes/native_extrema.h"
#include "passes/nest_reductions.h"
#include "passes/note_stored_broadcasts.h"
#include "passes/sink_reshapes.h"
#include "passes/prototype_casts.h"
#include "passes/reduce_transposed.h"
#include "passes/split_cat_reductions.h"
#include "passes/sink_into_branches.h"
#include "passes/sink_views.h"
#include "passes/snapshot_written_operands.h"
#include "passes/seal_no_grad_blocks.h"
#include "passes/unroll_accumulations.h"
#include "passes/zero_dim_numbers.h"
#include "tsfuse/log.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/passes/inliner.h>

#include <map>
#include <stdexcept>
#include <unordered_set>

namespace tsfuse {

const std::vector<PassInfo>& pipelinePasses() {
  static const std::vector<PassInfo> passes = {
      {"inline", "inline prim::CallMethod / prim::CallFunction so regions span calls",
       [](std::shared_ptr<torch::jit::Graph>& g) {
         torch::jit::Inline(*g);
         return true;
       }},
      {"seal_no_grad_blocks",
       "each tensor a `with torch.no_grad():` block hands to later code -> read through aten::detach, so "
       "regions may span the block",
       SealNoGradBlocks},
      {"zero_dim_numbers",
       "0-dim tensor constants as add/sub/mul/div's other -> numbers, as the executor's CanonicalizeOps "
       "(offline only: the executor's pre-pass receives a graph it has done)",
       ZeroDimNumbers, false, /*loadTime=*/false},
      {"unroll_accumulations",
       "for-range loop of constant trip count accumulating in place into a tensor made before it -> its iterations",
       UnrollAccumulations, true},
      {"canonicalize",
       "lower tuples, fold constants, in-place -> out-of-place (tsfuse::inplace_result keeps its dtype), identity "
       "slices, values-only max/min(dim) -> tsfuse::extremum_values, "
       "x[bool mask] = c -> where, x.expand_as(y) -> x.expand(y.size())",
       Canonicalize},
      {"prototype_casts",
       "a cast to a type known at run time (x.to(y), x.type_as(y), x.to(y.dtype)) of a fusible value -> x.to(p), p a "
       "0-dim prototype of that type (the cast fuses; y's metadata alone is read)",
       PrototypeCasts, true},
      {"fold_upcast", "prim::If on a tensor's dtype computing torchvision's _upcast -> tsfuse::upcast", FoldUpcast},
      {"decompose",
       "composite ATen ops (pairwise_distance, dist, triplet_margin_loss) -> the ATen calls their kernels make; a "
       "matrix-vector "
       "matmul over an expanded operand -> its sum of products, under a run-time guard keeping the matmul; "
       "eye read elementwise -> a comparison of two aranges; triu/tril read by fused ops -> where over such a "
       "comparison (passes/analysis/decompositions.cpp)",
       Decompose, true},
      {"count_selected", "x[bool mask of x's shape] read only for its length -> int(mask.sum()) (no selection made)",
       CountSelected, true},
      {"split_cat_reductions",
       "max/min(dim)'s values (any/all, amax/amin of bools) over the dim of a stack, or of a cat of pieces of "
       "size 1 there -> elementwise tsfuse::max_join/min_join (logical_or/and, maximum/minimum) of the pieces "
       "(tsfuse::cat_piece keeps the stack's errors)",
       SplitCatReductions, true},
      {"reduce_transposed",
       "a reduction of a transposed elementwise result -> the reduction of the result over the swapped dims "
       "(TensorIterator folds both in one order)",
       ReduceTransposed, true},
      {"sink_reshapes",
       "elementwise ops and last-dim reductions over reshaped operands -> the reshape after them (broadcast dims "
       "flattened and restored)",
       SinkReshapes, true},
      {"sink_views",
       "select/slice/unsqueeze/squeeze of an elementwise intermediate -> the same ops on views of its leaves",
       SinkViews},
      {"sink_into_branches",
       "an elementwise value only reductions inside if-branches read (elsewhere its metadata alone) -> its "
       "elementwise producers copied into each such branch, where the reduction fuses with them",
       SinkIntoBranches, true},
      {"fuse_broadcast_reduce", "reduction of an elementwise region -> tsfuse::reduce", FuseBroadcastReduce, true},
      {"nest_reductions", "reduction of a tsfuse::reduce's value -> tsfuse::reduce_chain (the value is never stored)",
       NestReductions, true},
      {"count_bool_sums",
       "sum of a bool value no fused op computes -> count_nonzero, or over dims tsfuse::reduce's count (no int64 "
       "copy of it)",
       CountBoolSums, true},
      {"fuse_pairwise",
       "elementwise region of >= 2 ops -> tsfuse::pairwise; one only metadata readers read (its value readers "
       "fused) -> tsfuse::shape_of for them (the value is not computed)",
       FusePairwise, true},
      {"hoist_into_epilogue",
       "ops of a fused op over an unsqueezed tsfuse::reduce value alone -> that reduction's epilogue",
       HoistIntoEpilogue, true},
      {"chain_fused_reductions",
       "tsfuse::reduce over a tsfuse::reduce/reduce_chain value, or whose epilogue reads a sibling reduction's "
       "-> tsfuse::reduce_chain with a fused last stage",
       ChainFusedReductions, true},
      {"fold_indices_epilogue",
       "tsfuse::pairwise over a tsfuse::reduce_with_indices' values and indices -> its epilogue (replacing the "
       "indices)",
       FoldIndicesEpilogue, true},
      {"native_extrema",
       "max/min(dim) with indices and argmax/argmin(dim) no fused op took -> tsfuse::extremum/arg_extremum (the "
       "fused kernels for a large float CPU tensor, where ATen's loops are slow)",
       NativeExtrema, true},
      {"cleanup", "remove the nodes rewrites left dead",
       [](std::shared_ptr<torch::jit::Graph>& g) {
         eraseDeadCode(g);
         return false;
       }},
      {"note_stored_broadcasts",
       "a broadcast left stored (an expanded value copied, a repeat, an unfused outer product) -> a rejection "
       "naming it (changes nothing)",
       NoteStoredBroadcasts, true},
      {"snapshot_written_operands",
       "operands a later in-place op writes -> tsfuse::saved_operand (a copy where the op saves its operands "
       "for a backward: grad mode, one requires grad)",
       SnapshotWrittenOperands},
      // After cleanup: a dead reader would keep an operand from being donated.
      {"donate_operands",
       "operands only a fused op reads -> its `donated` argument (its result may reuse their memory)", DonateOperands},
      {"full_slice_checks",
       "identity slices kept for the error they raise -> tsfuse::full_slice (the checks without a view)",
       FullSliceChecks},
  };
  return passes;
}

void PipelineOptions::validate() const {
  for (const auto& name : disabled) {
    bool known = false;
    for (const auto& p : pipelinePasses()) known |= p.name == name;
    if (!known) throw std::invalid_argument("unknown pass '" + name + "'");
  }
}

std::vector<PassStats> Report::stats() const {
  std::vector<PassStats> out;
  std::map<std::string, size_t> index;
  for (const auto& p : pipelinePasses()) {
    if (!p.counted) continue;
    index[p.name] = out.size();
    out.push_back({p.name});
  }
  for (const auto& e : events) {
    auto it = index.find(e.pass);
    if (it == index.end()) continue;
    PassStats& s = out[it->second];
    ++s.candidates;
    (e.kind == FusionEvent::Kind::Rewrite ? s.rewrites : s.rejections)++;
  }
  return out;
}

int Report::rewrites() const {
  int n = 0;
  for (const auto& e : events) n += e.kind == FusionEvent::Kind::Rewrite;
  return n;
}

bool runPipeline(std::shared_ptr<torch::jit::Graph>& graph, const PipelineOptions& options, Report* report,
                 const std::string& graphName) {
  ScopedGraphName name(graphName);
  ScopedEventSink sink([&](const FusionEvent& e) {
    if (report) report->events.push_back(e);
  });
  if (report) report->graphs.push_back(graphName);
  bool changed = false;
  if (options.observe) options.observe(graphName, "", *graph);
  for (const auto& pass : pipelinePasses()) {
    if (options.disabled.count(pass.name)) continue;
    bool c = pass.run(graph);
    if (options.observe) options.observe(graphName, pass.name, *graph);
    TSFUSE_LOG(registration, debug, "pass ", pass.name, " on '", graphName, "': ", c ? "changed" : "unchanged");
    changed |= c && pass.name != "inline" && pass.name != "seal_no_grad_blocks" && pass.name != "zero_dim_numbers" &&
               pass.name != "canonicalize";
  }
  return changed;
}

namespace {

// Runs the pipeline on `fn`'s graph (in place) as `graphName`; false where it has none (a builtin).
bool runOnGraphOf(torch::jit::Function& fn, const PipelineOptions& options, Report& report,
                  const std::string& graphName) {
  auto* graphFn = torch::jit::tryToGraphFunction(fn);
  if (!graphFn) return false;
  std::shared_ptr<torch::jit::Graph> g = graphFn->graph();
  runPipeline(g, options, &report, graphName);
  return true;
}

}  // namespace

Report optimizeModule(torch::jit::Module& module, const PipelineOptions& options) {
  options.validate();
  Report report;
  std::unordered_set<torch::jit::Function*> done;
  auto visit = [&](const torch::jit::Module& m, const std::string& prefix) {
    for (const auto& method : m.get_methods()) {
      torch::jit::Function& fn = method.function();
      if (done.insert(&fn).second) runOnGraphOf(fn, options, report, prefix + method.name());
    }
  };
  visit(module, "");
  for (const auto& child : module.named_modules()) {
    if (child.name.empty()) continue;
    visit(child.value, child.name + ".");
  }
  return report;
}

Report optimizeFunction(torch::jit::Function& function, const PipelineOptions& options, const std::string& graphName) {
  options.validate();
  Report report;
  TORCH_CHECK(runOnGraphOf(function, options, report, graphName), "tsfuse: '", function.qualname().qualifiedName(),
              "' has no TorchScript graph to optimize (a builtin or native function)");
  return report;
}

}  // namespace tsfuse
