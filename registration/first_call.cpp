#include "registration/first_call.h"

#include "registration/executor_hook.h"
#include "tsfuse/executor.h"
#include "tsfuse/log.h"

#include <ATen/record_function.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/csrc/jit/runtime/profiling_record.h>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace tsfuse {
namespace {

struct Policy {
  std::mutex mu;
  size_t users = 0;
  size_t pytorchRuns = 1;
  std::optional<at::CallbackHandle> observer;
  // Methods already attributed, with their graph: a method freed and another allocated at the
  // same address has another graph (the old one expired with its method).
  std::unordered_map<const torch::jit::Function*, std::weak_ptr<torch::jit::Graph>> seen;
  size_t pruneAt = 64;
  FirstCallStats stats;
};
Policy& policy() {
  static Policy p;
  return p;
}

// Nonzero while this thread's candidate-free graph has PyTorch's count (this value) and its
// executor has not yet read it. Lending and restoring are compare-and-swap under the policy's
// lock: a count someone else set meanwhile (the user) is theirs and stays, and nothing is
// restored once the last registration has given the count back.
thread_local size_t tLentRuns = 0;
thread_local const c10::Type* tLentSelf = nullptr;  // the lending method's module class

struct Lent : at::ObserverContext {};

bool lendProfiledRuns(const c10::Type* self) {
  Policy& p = policy();
  std::lock_guard<std::mutex> lock(p.mu);
  size_t expected = 0;
  if (p.users == 0 || p.pytorchRuns == 0 ||
      !torch::jit::getNumProfiledRuns().compare_exchange_strong(expected, p.pytorchRuns))
    return false;
  tLentRuns = p.pytorchRuns;
  tLentSelf = self;
  return true;
}

void restoreFirstCallCount() {
  if (tLentRuns == 0) return;
  size_t expected = tLentRuns;
  tLentRuns = 0;
  Policy& p = policy();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.users > 0) torch::jit::getNumProfiledRuns().compare_exchange_strong(expected, 0);
}

// The method `name` of the module `self`, if it is a graph function.
torch::jit::GraphFunction* methodOf(const c10::IValue& self, const std::string& name) {
  if (!self.isObject()) return nullptr;
  torch::jit::Function* f = self.toObjectRef().type()->findMethod(name);
  if (!f || !f->isGraphFunction()) return nullptr;
  return &torch::jit::toGraphFunction(*f);
}

// "aten::mul at file.py:12" (the source line where the graph keeps it).
std::string describe(const torch::jit::Node* n) {
  if (!n) return "none";
  std::string d = n->kind().toQualString();
  if (auto loc = n->sourceRange().file_line_col())
    d += " at " + std::get<0>(*loc) + ":" + std::to_string(std::get<1>(*loc));
  return d;
}

bool firstSight(Policy& p, torch::jit::GraphFunction* method) {
  std::shared_ptr<torch::jit::Graph> graph = method->graph();
  std::lock_guard<std::mutex> lock(p.mu);
  auto it = p.seen.find(method);
  if (it != p.seen.end() && it->second.lock() == graph) return false;
  if (p.seen.size() >= p.pruneAt) {
    for (auto e = p.seen.begin(); e != p.seen.end();) e = e->second.expired() ? p.seen.erase(e) : std::next(e);
    p.pruneAt = std::max<size_t>(64, 2 * p.seen.size());
  }
  p.seen[method] = graph;
  return true;
}

// At the first call of `self`'s method `name` with `inputs` (self first; empty where the call's
// values are not known): lends PyTorch's count when that call stores no broadcast intermediate a
// fusion would remove; returns whether it did (the caller restores it when the call returns).
bool attribute(const c10::IValue& self, const std::string& name, c10::ArrayRef<c10::IValue> inputs) {
  // The user set another count after loading us: theirs stands.
  if (torch::jit::getNumProfiledRuns().load() != 0) return false;
  // Switched off (tsfuse.enabled(False)): the executor optimizes, without the pass, at the first
  // call as documented, not at a second call that may come after the switch is back on.
  if (!isEnabled()) return false;
  torch::jit::GraphFunction* method = methodOf(self, name);
  if (!method) return false;
  Policy& p = policy();
  if (!firstSight(p, method)) return false;
  // Already planned (called before, or through a path nobody attributed): the count is read.
  // From the observer this is also how Python's calls look: the interpreter records each frame
  // after its executor chose a plan.
  if (method->get_executor().isOptimized()) return false;
  // The graph the executor is built from (inlined; cached, so the executor does not redo it).
  const torch::jit::Node* candidate = firstCallCandidate(method->optimized_graph(), inputs);
  const bool candidates = candidate != nullptr;
  {
    std::lock_guard<std::mutex> lock(p.mu);
    ++(candidates ? p.stats.firstCall : p.stats.profiled);
  }
  TSFUSE_LOG(registration, debug, "first call of ", method->qualname().qualifiedName(), ": ",
             candidates ? "fused (first-call mode): candidate " + describe(candidate)
                        : std::string("no broadcast intermediate to fuse, PyTorch's profiled run"));
  return !candidates && lendProfiledRuns(self.type().get());
}

bool attributeOrKeep(const c10::IValue& self, const std::string& name, c10::ArrayRef<c10::IValue> inputs) {
  try {
    return attribute(self, name, inputs);
  } catch (const std::exception& e) {
    // Compiling the method failed; the call itself raises the same error. Keep first-call mode.
    TSFUSE_LOG(registration, debug, "first-call policy skipped a method: ", e.what());
    return false;
  }
}

// A TORCHSCRIPT_FUNCTION record's first input is the module (self) of the method it names.
std::unique_ptr<at::ObserverContext> onMethodCall(const at::RecordFunction& fn) {
  auto inputs = fn.inputs();
  if (inputs.empty() || !attributeOrKeep(inputs[0], fn.name(), inputs)) return nullptr;
  return std::make_unique<Lent>();
}

// Only the record that lent restores: nested records (the interpreter's frame of this call, a
// TorchScript function that compiling runs, e.g. default-argument evaluation) end inside it.
void onMethodReturn(const at::RecordFunction&, at::ObserverContext* lent) {
  if (lent) restoreFirstCallCount();
}

// Called while the executor instruments a graph, i.e. after it has read the count.
bool onProfilingQuery(const torch::jit::Node* n) {
  if (tLentRuns == 0) return false;
  // The graph being instrumented is the lending method's when its self is of that module's class
  // (the executor may first instrument others: functions compiled on the way).
  auto inputs = n->owningGraph()->inputs();
  if (!inputs.empty() && inputs[0]->type().get() == tLentSelf) restoreFirstCallCount();
  return false;
}

// Python calls a scripted module through Function::run, which the observer cannot attribute (see
// the header), so in a process that runs Python it would cost every call and help none.
bool pythonRunning() {
  using IsInitialized = int (*)();
  auto isInitialized = reinterpret_cast<IsInitialized>(dlsym(RTLD_DEFAULT, "Py_IsInitialized"));
  return isInitialized && isInitialized() != 0;
}

}  // namespace

size_t acquireFirstCallPolicy() {
  Policy& p = policy();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.users++ > 0) return p.pytorchRuns;
  p.pytorchRuns = torch::jit::getNumProfiledRuns().exchange(0);
  static const bool kQueryHook = (torch::jit::RegisterProfilingNode(onProfilingQuery), true);
  (void)kQueryHook;
  if (pythonRunning()) {
    TSFUSE_LOG(registration, info,
               "first-call mode per method only for Python calls through the tsfuse package's hook");
    return p.pytorchRuns;
  }
  p.observer = at::addGlobalCallback(at::RecordFunctionCallback(onMethodCall, onMethodReturn)
                                         .needsInputs(true)
                                         .scopes({at::RecordScope::TORCHSCRIPT_FUNCTION}));
  return p.pytorchRuns;
}

bool beginFirstCall(const c10::IValue& self, const std::string& method, const std::optional<c10::IValue>& args) {
  if (!args || !(args->isTuple() || args->isList())) return attributeOrKeep(self, method, {});
  std::vector<c10::IValue> inputs{self};
  if (args->isTuple()) {
    const auto& e = args->toTupleRef().elements();
    inputs.insert(inputs.end(), e.begin(), e.end());
  } else {
    for (const c10::IValue& v : args->toListRef()) inputs.push_back(v);
  }
  return attributeOrKeep(self, method, inputs);
}

void endFirstCall() { restoreFirstCallCount(); }

void releaseFirstCallPolicy() {
  Policy& p = policy();
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.users == 0 || --p.users > 0) return;
  if (p.observer) at::removeCallback(*p.observer);
  p.observer.reset();
  torch::jit::getNumProfiledRuns() = p.pytorchRuns;
}

FirstCallStats firstCallStats() {
  Policy& p = policy();
  std::lock_guard<std::mutex> lock(p.mu);
  return p.stats;
}

}  // namespace tsfuse
