// optimize-ts's run on a module in memory, as a torch op (libtsfuse_tool.so), which tsfuse.optimize
// and tsfuse.explain call through torch.ops, so their text is the tool's own, with no binding:
//   tsfuse::optimize_module(Any module, str name, str[] disabled, str view, str? function=None)
//       -> (str text, str report)
// Rewrites every method of `module` (a ScriptModule, shared with the caller) in place. With
// `function`, `module` is a scripted function's wrapper (what ScriptFunction.save writes: its
// forward is the function) and only forward is rewritten, its graph named `function`. `text` is
// the summary without its file line (view "summary" or "verbose") or the --explain text (view
// "explain"); `report` is the --report JSON document. `name` stands for the input file in both.
//
//   tsfuse::function_from_forward(Any module, str name, str schema) -> str
// The wrapper's forward back as a function `name` of the wrapper's compilation unit (mangled where
// the name is taken): forward's graph without `self`, and `schema`, the original function's
// (ScriptFunction.save drops argument defaults, so the wrapper's own schema has none). Returns the
// new function's qualified name.
#include "tools/graph_view.h"
#include "tools/report.h"

#include <torch/csrc/jit/frontend/function_schema_parser.h>
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

std::string functionFromForward(const c10::IValue& module, const std::string& name, const std::string& schemaText) {
  TORCH_CHECK_TYPE(module.isObject() && module.toObjectRef().type()->is_module(),
                   "function_from_forward: expected a ScriptModule, got ", module.type()->repr_str());
  torch::jit::Module m(module.toObject());
  std::shared_ptr<torch::jit::Graph> graph =
      torch::jit::toGraphFunction(m.get_method("forward").function()).graph()->copy();
  graph->eraseInput(0);
  const c10::FunctionSchema schema = torch::jit::parseSchema(schemaText);
  TORCH_CHECK_VALUE(schema.arguments().size() == graph->inputs().size(), "function_from_forward: schema '", schemaText,
                    "' has ", schema.arguments().size(), " arguments, the graph ", graph->inputs().size());
  const std::shared_ptr<torch::jit::CompilationUnit> cu = m.type()->compilation_unit();
  const c10::QualifiedName qualified(name);
  torch::jit::Function* fn = cu->create_function(qualified, graph, cu->find_function(qualified) != nullptr);
  fn->setSchema(schema.cloneWithName(fn->name(), schema.overload_name()));
  return fn->qualname().qualifiedName();
}

}  // namespace
}  // namespace tsfuse::tool

TORCH_LIBRARY_FRAGMENT(tsfuse, m) {
  m.def(
      "optimize_module(Any module, str name, str[] disabled, str view, str? function=None)"
      " -> (str text, str report)",
      torch::CppFunction::makeFromBoxedFunction<&tsfuse::tool::optimizeModuleOp>());
  m.def("function_from_forward(Any module, str name, str schema) -> str", &tsfuse::tool::functionFromForward);
}
