// Helpers of the IR-string pass tests (tests/ir/*.cpp): parse IR text, run a pass while
// collecting its FusionEvents, FileCheck the result, find fused nodes, run graphs.
#pragma once

#include "test_util.h"

#include "passes/framework/events.h"
#include "passes/fuse_broadcast_reduce.h"
#include "passes/fuse_pairwise.h"
#include "registration/pipeline.h"

#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/irparser.h>
#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/csrc/jit/testing/file_check.h>

#include <memory>
#include <unordered_map>

namespace tsfuse_test {

using torch::jit::Graph;
using torch::jit::testing::FileCheck;

inline std::shared_ptr<Graph> parseGraph(const std::string& ir) {
  auto g = std::make_shared<Graph>();
  torch::jit::parseIR(ir, g.get());
  g->lint();
  return g;
}

// parseGraph, keeping the IR's value names (the parser numbers values afresh), so nodeId() of a
// node is "%" + the name the test gave its output.
inline std::shared_ptr<Graph> parseNamedGraph(const std::string& ir) {
  auto g = std::make_shared<Graph>();
  std::unordered_map<std::string, torch::jit::Value*> names;
  torch::jit::parseIR(ir, g.get(), names);
  for (const auto& [name, v] : names) v->setDebugName(name);
  g->lint();
  return g;
}

// The graph `graph(<signature>): <constants> <body>`, where the constants every IR-string test
// may name without declaring are %none, %false, %true, %zero (0), %one, %two, %m1 (-1) and %dims1
// ([1]), plus a file's own `extra` ones (unused constants are harmless). `named` keeps the IR's
// value names (parseNamedGraph).
inline std::shared_ptr<Graph> graphWithConstants(const std::string& signature, const std::string& body,
                                                 const std::string& extra = "", bool named = false) {
  static const std::string kConstants = R"IR(
  %none : NoneType = prim::Constant()
  %false : bool = prim::Constant[value=0]()
  %true : bool = prim::Constant[value=1]()
  %zero : int = prim::Constant[value=0]()
  %one : int = prim::Constant[value=1]()
  %two : int = prim::Constant[value=2]()
  %m1 : int = prim::Constant[value=-1]()
  %dims1 : int[] = prim::Constant[value=[1]]()
)IR";
  const std::string ir = "graph(" + signature + "):" + kConstants + extra + body;
  return named ? parseNamedGraph(ir) : parseGraph(ir);
}

// The lines scripting emits for `x[mask] = c` (%c, %mask: declared values): index_put_ of
// tensor(c, dtype=x.dtype, device=x.device), their names tagged.
inline std::string maskWriteIR(const std::string& x, const std::string& mask, const std::string& c,
                               const std::string& tag = "", const std::string& accumulate = "%false") {
  return "  %dt" + tag + " : int = prim::dtype(" + x + ")\n  %dev" + tag + " : Device = prim::device(" + x +
         ")\n  %val" + tag + " : Tensor = aten::tensor(" + c + ", %dt" + tag + ", %dev" + tag + ", %false)\n  %idx" +
         tag + " : Tensor?[] = prim::ListConstruct(" + mask + ")\n  %w" + tag + " : Tensor = aten::index_put_(" + x +
         ", %idx" + tag + ", %val" + tag + ", " + accumulate + ")\n";
}

// graph(%x, %y, %b): %d, the squared differences of %x and %y summed over the last dim (the
// distance forms' inner reduction), then `body`. %dimsm1 ([-1]) is declared besides the common
// constants; `extra` declares a file's own. Value names are kept.
inline std::shared_ptr<Graph> squaredDistancesThen(const std::string& body, const std::string& extra = "") {
  return graphWithConstants("%x : Tensor, %y : Tensor, %b : Tensor",
                            "  %s : Tensor = aten::sub(%x, %y, %one)\n"
                            "  %sq : Tensor = aten::mul(%s, %s)\n"
                            "  %d : Tensor = aten::sum(%sq, %dimsm1, %false, %none)\n" +
                                body,
                            "  %dimsm1 : int[] = prim::Constant[value=[-1]]()\n" + extra, /*named=*/true);
}

struct PassRun {
  bool changed = false;
  std::vector<tsfuse::FusionEvent> events;
  std::string ir;  // the graph after the pass

  int count(tsfuse::FusionEvent::Kind k) const {
    int n = 0;
    for (const auto& e : events) n += e.kind == k;
    return n;
  }
  int rewrites() const { return count(tsfuse::FusionEvent::Kind::Rewrite); }
  int rewritesBy(const std::string& pass) const {
    int n = 0;
    for (const auto& e : events) n += e.kind == tsfuse::FusionEvent::Kind::Rewrite && e.pass == pass;
    return n;
  }
  int rejects() const { return count(tsfuse::FusionEvent::Kind::Reject); }
  // True when some Reject event's reason contains `substr`.
  bool rejectedWith(const std::string& substr) const {
    for (const auto& e : events)
      if (e.kind == tsfuse::FusionEvent::Kind::Reject && e.reason.find(substr) != std::string::npos) return true;
    return false;
  }
  const tsfuse::FusionEvent* firstRewrite() const {
    for (const auto& e : events)
      if (e.kind == tsfuse::FusionEvent::Kind::Rewrite) return &e;
    return nullptr;
  }
  std::string dump() const {
    std::ostringstream os;
    os << "changed=" << changed << "\n";
    for (const auto& e : events)
      os << (e.kind == tsfuse::FusionEvent::Kind::Rewrite ? "REWRITE " : "REJECT ") << e.pass << ": " << e.reason
         << " [" << e.expr << "]\n";
    os << ir;
    return os.str();
  }
};

// Every event names each of its nodes with an id ("%x"), in the same order as their descriptions,
// and every rewrite the node that replaced them: the HTML viewer pairs nodes[i] with nodeIds[i] to
// link a node to that one. The run helpers below check it for every event of every IR test.
inline ::testing::AssertionResult eventsNameTheirNodes(const std::vector<tsfuse::FusionEvent>& events) {
  for (const auto& e : events) {
    bool ok = e.nodes.size() == e.nodeIds.size() &&
              (e.kind == tsfuse::FusionEvent::Kind::Reject || e.fusedNode.rfind("%", 0) == 0);
    for (size_t i = 0; ok && i < e.nodeIds.size(); ++i) ok = e.nodeIds[i].size() > 1 && e.nodeIds[i][0] == '%';
    if (!ok) {
      auto failure = ::testing::AssertionFailure() << e.pass << " event \"" << e.reason << "\" (fused node '"
                                                   << e.fusedNode << "') has " << e.nodes.size() << " nodes and ids";
      for (const auto& id : e.nodeIds) failure << " '" << id << "'";
      return failure;
    }
  }
  return ::testing::AssertionSuccess();
}

// Runs `pass` on `g` (in place) while collecting the events it emits.
inline PassRun runPass(std::shared_ptr<Graph>& g, const std::function<bool(std::shared_ptr<Graph>&)>& pass) {
  PassRun r;
  {
    tsfuse::ScopedEventSink sink([&](const tsfuse::FusionEvent& e) { r.events.push_back(e); });
    r.changed = pass(g);
  }
  EXPECT_TRUE(eventsNameTheirNodes(r.events));
  g->lint();
  r.ir = g->toString();
  return r;
}

inline PassRun runPairwise(std::shared_ptr<Graph>& g) { return runPass(g, tsfuse::FusePairwise); }
inline PassRun runReduce(std::shared_ptr<Graph>& g) { return runPass(g, tsfuse::FuseBroadcastReduce); }
// The pipeline collects its events into its Report (its own sink shadows ours).
inline PassRun runPipelineOn(std::shared_ptr<Graph>& g, const tsfuse::PipelineOptions& opts = {}) {
  PassRun r;
  tsfuse::Report rep;
  r.changed = tsfuse::runPipeline(g, opts, &rep, "forward");
  r.events = rep.events;
  EXPECT_TRUE(eventsNameTheirNodes(r.events));
  g->lint();
  r.ir = g->toString();
  return r;
}

// A graph through the whole pipeline, and a copy of it from before (the reference).
struct Piped {
  std::shared_ptr<Graph> g, ref;
  PassRun r;
};
inline Piped pipeline(std::shared_ptr<Graph> g) {
  Piped run{g, g->copy(), {}};
  run.r = runPipelineOn(run.g);
  return run;
}

// Executes a graph on the given inputs with the TorchScript interpreter; returns its outputs.
inline std::vector<c10::IValue> runGraph(const std::shared_ptr<Graph>& g, const std::vector<c10::IValue>& inputs) {
  torch::jit::Code code(g->copy(), "test");
  torch::jit::InterpreterState state(code);
  torch::jit::Stack stack(inputs.begin(), inputs.end());
  state.run(stack);
  return stack;
}

// Runs a FileCheck built by `build` on `ir`; the failure message carries FileCheck's report.
inline ::testing::AssertionResult fileCheck(const std::string& ir, const std::function<void(FileCheck&)>& build) {
  try {
    FileCheck fc;
    build(fc);
    fc.run(ir);
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << e.what() << "\n--- graph ---\n" << ir;
  }
  return ::testing::AssertionSuccess();
}

// The nodes of `kind` (e.g. "tsfuse::reduce") anywhere in the graph, sub-blocks included.
inline std::vector<torch::jit::Node*> findNodes(const std::shared_ptr<Graph>& g, const std::string& kind) {
  std::vector<torch::jit::Node*> out;
  std::function<void(torch::jit::Block*)> visit = [&](torch::jit::Block* b) {
    for (torch::jit::Node* n : b->nodes()) {
      if (std::string(n->kind().toQualString()) == kind) out.push_back(n);
      for (torch::jit::Block* sub : n->blocks()) visit(sub);
    }
  };
  visit(g->block());
  return out;
}

// The tsfuse:: ops of `g`'s top block that compute: not wrapped_number, not the broadcast_* views,
// not the checks (full_slice, check_reshape).
inline int computingFusedOps(const std::shared_ptr<Graph>& g) {
  int n = 0;
  for (torch::jit::Node* node : g->nodes()) {
    const std::string kind = node->kind().toQualString();
    n += kind.rfind("tsfuse::", 0) == 0 && kind != "tsfuse::wrapped_number" && kind != "tsfuse::full_slice" &&
         kind != "tsfuse::check_reshape" && kind.rfind("tsfuse::broadcast_", 0) != 0;
  }
  return n;
}

// The constant value of input i of n (throws when it is not a constant).
inline c10::IValue constInput(torch::jit::Node* n, size_t i) {
  auto v = torch::jit::toIValue(n->input(i));
  TORCH_CHECK(v.has_value(), "input ", i, " of ", n->kind().toQualString(), " is not a constant");
  return *v;
}

// The expr string of a fused node.
inline std::string exprOf(torch::jit::Node* n) { return constInput(n, 1).toStringRef(); }

// The error a graph raises on `in` (the last line of the interpreter's report, after the graph
// excerpt, which differs between a graph and its rewrite), or "" when it runs.
inline std::string errorOf(const std::shared_ptr<Graph>& g, std::vector<c10::IValue> in) {
  try {
    runGraph(g, std::move(in));
  } catch (const std::exception& e) {
    std::string what = e.what();
    while (!what.empty() && what.back() == '\n') what.pop_back();
    return what.substr(what.rfind('\n') + 1);
  }
  return "";
}

// Runs `g` and `ref` on the same inputs and checks that every output agrees (see sameTensor;
// numbers, bools and int lists must be equal).
inline ::testing::AssertionResult sameOutputs(const std::shared_ptr<Graph>& ref, const std::shared_ptr<Graph>& g,
                                              const std::vector<c10::IValue>& inputs, bool exact = true) {
  auto clone = [](const std::vector<c10::IValue>& in) {
    std::vector<c10::IValue> out;
    for (const auto& v : in) out.push_back(v.isTensor() ? c10::IValue(v.toTensor().clone()) : v);
    return out;
  };
  auto a = runGraph(ref, clone(inputs));
  auto b = runGraph(g, clone(inputs));
  if (a.size() != b.size()) return ::testing::AssertionFailure() << "output counts differ";
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].isTensor() != b[i].isTensor()) return ::testing::AssertionFailure() << "output " << i << " kinds differ";
    if (!a[i].isTensor()) {
      bool comparable = a[i].isInt() || a[i].isDouble() || a[i].isBool() || a[i].isIntList();
      if (comparable && !(a[i] == b[i]))
        return ::testing::AssertionFailure() << "output " << i << ": " << a[i] << " vs " << b[i];
      continue;
    }
    auto r = sameTensor(a[i].toTensor(), b[i].toTensor(), exact);
    if (!r) return r << " (output " << i << ")";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tsfuse_test
