// optimize-ts's run on a module in memory, as a torch op (libtsfuse_tool.so), which tsfuse.optimize
// and tsfuse.explain call through torch.ops, so their text is the tool's own, with no binding:
//   tsfuse::optimize_module(Any module, str name, str[] disabled, str view, str? function=None)
//       -> (str text, str report)
// Rewrites every method of `module` (a ScriptModule, shared with the caller) in place. With
// `function`, `module` is a scripted function's wrapper (what ScriptFunction.save writes: its
// forward is the function) and only forward is rewritten, its graph named `function`. `text` is
// the summary without its file line (view "summary" or "verbose") or the --explain text (view
// "explain"); `report` is the --report JSON document. `name` stands for the input file in both.
#include "tools/graph_view.h"
#include "tools/report.h"

#include <torch/library.h>

#include <sstream>
#include <stdexcept>

namespace tsfuse::tool {
namespace {

void optimizeModuleOp(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  const c10::IValue function = stack->back();
  const std::string view = (*stack)[stack->size() - 2].toStringRef();
  std::vector<std::string> disabled;
  for (const c10::IValue& p : (*stack)[stack->size() - 3].toListRef()) disabled.push_back(p.toStringRef());
  const std::string name = (*stack)[stack->size() - 4].toStringRef();
  const c10::IValue module = (*stack)[stack->size() - 5];
  torch::jit::drop(*stack, 5);

  TORCH_CHECK_VALUE(view == "summary" || view == "verbose" || view == "explain",
                    "optimize_module: view must be summary, verbose or explain, not '", view, "'");
  TORCH_CHECK_TYPE(module.isObject() && module.toObjectRef().type()->is_module(),
                   "optimize_module: expected a ScriptModule (torch.jit.script, trace or load), got ",
                   module.type()->repr_str());
  PipelineOptions options;
  options.disabled.insert(disabled.begin(), disabled.end());
  try {
    options.validate();
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
  GraphRecorder graphs;
  if (view == "explain") options.observe = graphs.observer();

  torch::jit::Module m(module.toObject());
  Report report = function.isNone()
                      ? optimizeModule(m, options)
                      : optimizeFunction(m.get_method("forward").function(), options, function.toStringRef());

  RunInfo info{name, "", false};
  std::ostringstream text;
  if (view == "explain")
    printExplain(text, report, graphs, info);
  else
    printEvents(text, report, view == "verbose");
  stack->emplace_back(text.str());
  stack->emplace_back(reportJson(report, info, nullptr).dump(2));
}

}  // namespace
}  // namespace tsfuse::tool

TORCH_LIBRARY_FRAGMENT(tsfuse, m) {
  m.def(
      "optimize_module(Any module, str name, str[] disabled, str view, str? function=None)"
      " -> (str text, str report)",
      torch::CppFunction::makeFromBoxedFunction<&tsfuse::tool::optimizeModuleOp>());
}
