#include "registration/executor_hook.h"

#include "registration/executor_settings.h"
#include "registration/first_call.h"
#include "passes/analysis/broadcast_probe.h"
#include "passes/framework/driver.h"
#include "passes/analysis/op_table.h"
#include "passes/analysis/region_starts.h"
#include "tsfuse/log.h"

#include <ATen/Version.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/headeronly/version.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_set>

namespace tsfuse {
namespace {

std::atomic<bool> gEnabled{true};
std::atomic<int64_t> gPipelineFailures{0};

struct OptOuts {
  std::mutex mu;
  std::vector<c10::ClassTypePtr> types;  // kept alive: compared by pointer
  bool contains(const c10::ClassType* t) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& p : types)
      if (p.get() == t) return true;
    return false;
  }
};
OptOuts& optOuts() {
  static OptOuts o;
  return o;
}

bool envFlag(const char* name, bool dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  std::string s(v);
  return !(s == "0" || s == "false" || s == "off" || s == "no");
}

// The executor's graph carries prim::profile nodes between producers and consumers; they would
// cut every region apart. They only feed specialisations that the pre-pass precedes, and with
// first-call mode there is no profile to lose.
void stripProfileNodes(torch::jit::Block* b) {
  for (auto it = b->nodes().begin(); it != b->nodes().end();) {
    torch::jit::Node* n = *it;
    ++it;
    for (auto* sub : n->blocks()) stripProfileNodes(sub);
    if (n->kind() == c10::prim::profile && n->inputs().size() == 1 && n->outputs().size() == 1) {
      n->output()->replaceAllUsesWith(n->input());
      n->destroy();
    }
  }
}

bool optedOut(const std::shared_ptr<torch::jit::Graph>& g) {
  if (g->inputs().empty()) return false;
  auto cls = g->inputs()[0]->type()->cast<c10::ClassType>();
  if (!cls) return false;
  if (cls->hasAttribute("tsfuse_opt_out")) return true;
  return optOuts().contains(cls.get());
}

}  // namespace

int64_t executorPipelineFailures() { return gPipelineFailures.load(); }

std::string builtTorchVersion() { return TORCH_VERSION; }

std::string runtimeTorchVersion() {
  const std::string cfg = at::show_config();
  const std::string key = "TORCH_VERSION=";
  auto pos = cfg.find(key);
  if (pos == std::string::npos) return "unknown";
  auto end = cfg.find_first_of(", \n", pos + key.size());
  return cfg.substr(pos + key.size(), end - pos - key.size());
}

void setEnabled(bool on) { gEnabled = on; }
bool isEnabled() { return gEnabled; }

void optOut(const torch::jit::Module& m) {
  std::lock_guard<std::mutex> lock(optOuts().mu);
  optOuts().types.push_back(m.type());
}

PipelineOptions optionsFromEnvironment() {
  PipelineOptions o;
  const char* only = std::getenv("TSFUSE_PASSES");
  if (!only || !*only) return o;
  std::unordered_set<std::string> keep;
  std::stringstream ss(only);
  for (std::string name; std::getline(ss, name, ',');) {
    bool known = false;
    for (const auto& p : pipelinePasses()) known |= p.name == name;
    if (!known) throw std::invalid_argument("TSFUSE_PASSES: unknown pass '" + name + "'");
    keep.insert(name);
  }
  for (const auto& p : pipelinePasses())
    if (!keep.count(p.name)) o.disabled.insert(p.name);
  return o;
}

namespace {

// NB: torch::jit::registerPrePass / clearPrePass mutate a plain static vector that every graph
// executor iterates, on whatever thread, when it optimizes a graph: changing it while models run
// is a data race inside torch (invisible to TSan: libtorch is not instrumented). So torch's list
// gets ONE trampoline, added by the first registration (at library load, before any model runs)
// and never removed; registrations live in our own list, replaced copy-on-write under a mutex, so
// a pass running on another thread keeps the snapshot it started with.
struct ActivePass {
  torch::jit::GraphPassNameType id;
  PipelineOptions options;
};
using ActiveList = std::vector<ActivePass>;

struct Registry {
  std::mutex mu;
  std::shared_ptr<const ActiveList> active = std::make_shared<const ActiveList>();
  torch::jit::GraphPassNameType nextId = 1;
  bool trampolineRegistered = false;
};
Registry& registry() {
  static Registry r;
  return r;
}

std::shared_ptr<const ActiveList> activePasses() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.active;
}

// With info logging on, the pipeline's options time each pass; bench/load_cost.py reads the line.
struct PassTimer {
  using Clock = std::chrono::steady_clock;
  Clock::time_point start = Clock::now(), last = start;
  std::ostringstream perPass;
  static double ms(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  }
  PipelineOptions wrap(const PipelineOptions& o) {
    PipelineOptions timed = o;
    timed.observe = [this, inner = o.observe](const std::string& graph, const std::string& stage,
                                              const torch::jit::Graph& g) {
      if (inner) inner(graph, stage, g);
      auto now = Clock::now();
      if (!stage.empty()) perPass << " " << stage << " " << ms(last, now);
      last = Clock::now();
    };
    return timed;
  }
};

bool passApplies(const ActiveList& active, const std::shared_ptr<torch::jit::Graph>& g) {
  return !active.empty() && gEnabled && !optedOut(g);
}

void runActivePasses(std::shared_ptr<torch::jit::Graph>& g) {
  std::shared_ptr<const ActiveList> active = activePasses();
  if (!passApplies(*active, g)) return;
  std::optional<PassTimer> timer;
  if (log::enabled(log::Component::registration, log::Level::info)) timer.emplace();
  // Graphs with nothing to fuse are left exactly as the executor made them (profile nodes too).
  if (!mayFuse(g->block())) {
    if (timer)
      TSFUSE_LOG(registration, info, "executor pass on a graph of ", countNodes(g->block()),
                 " nodes: ", PassTimer::ms(timer->start, PassTimer::Clock::now()), " ms (nothing to fuse)");
    return;
  }
  stripProfileNodes(g->block());
  for (const ActivePass& p : *active) {
    // A pass failure must never take the model down: it then runs as it was before the pipeline.
    // The passes rewrite only after their checks, but a throw inside a rewrite (an internal
    // assert of the IR) would leave the graph half rewritten, so the executor gets the copy taken
    // before (its graph is this reference).
    std::shared_ptr<torch::jit::Graph> before = g->copy();
    try {
      runPipeline(g, timer ? timer->wrap(p.options) : p.options, nullptr, "executor");
    } catch (const std::exception& e) {
      g = std::move(before);
      ++gPipelineFailures;
      TSFUSE_LOG(registration, error, "pipeline failed, graph left unoptimized: ", e.what());
    }
  }
  if (timer)
    TSFUSE_LOG(registration, info, "executor pass on a graph of ", countNodes(g->block()),
               " nodes: ", PassTimer::ms(timer->start, PassTimer::Clock::now()),
               " ms (ms per pass:", timer->perPass.str(), ")");
}

}  // namespace

namespace {

// TSFUSE_FIRST_CALL, read once. Off ("0", "false", "off", "no"): the executor keeps its profiling
// runs. Fusible ("fusible"): every method with a region start is fused on its first call,
// whatever its shapes: first-call memory over first-call time (a chain of same-shape ops over a
// large matmul or cdist output stores a few copies of it unfused; that call then costs PyTorch's
// optimization too). Otherwise: calls that store a broadcast intermediate (passes/analysis/broadcast_probe.h).
enum class FirstCall { Off, Broadcast, Fusible };

FirstCall firstCallSetting() {
  static const FirstCall setting = [] {
    if (!envFlag("TSFUSE_FIRST_CALL", true)) return FirstCall::Off;
    const char* v = std::getenv("TSFUSE_FIRST_CALL");
    return v && std::string(v) == "fusible" ? FirstCall::Fusible : FirstCall::Broadcast;
  }();
  return setting;
}

}  // namespace

const torch::jit::Node* firstCallCandidate(const std::shared_ptr<torch::jit::Graph>& g,
                                           c10::ArrayRef<c10::IValue> inputs) {
  if (!passApplies(*activePasses(), g)) return nullptr;
  if (inputs.empty() || firstCallSetting() == FirstCall::Fusible) return firstFusionCandidate(g->block());
  return firstBroadcastCandidate(g, inputs);
}

PipelineOptions executorPipelineOptions(PipelineOptions options) {
  for (const PassInfo& p : pipelinePasses())
    if (!p.loadTime) options.disabled.insert(p.name);
  return options;
}

ExecutorRegistration registerExecutorPass(PipelineOptions options, bool firstCall) {
  options.validate();
  options = executorPipelineOptions(std::move(options));
  ExecutorRegistration r;
  {
    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mu);
    if (!reg.trampolineRegistered) {
      torch::jit::registerPrePass(runActivePasses);
      reg.trampolineRegistered = true;
      // Settings under which the executor would never call it are warned about instead.
      watchExecutorSettings();
    }
    r.prePass = reg.nextId++;
    auto next = std::make_shared<ActiveList>(*reg.active);
    next->push_back({r.prePass, std::move(options)});
    reg.active = std::move(next);
  }
  if (firstCall) r.previousProfiledRuns = acquireFirstCallPolicy();
  TSFUSE_LOG(registration, info, "executor pre-pass registered (id ", r.prePass, ", first-call ",
             firstCall ? "on" : "off", ")");
  return r;
}

void clearExecutorPass(const ExecutorRegistration& r) {
  {
    Registry& reg = registry();
    std::lock_guard<std::mutex> lock(reg.mu);
    auto next = std::make_shared<ActiveList>();
    for (const ActivePass& p : *reg.active)
      if (p.id != r.prePass) next->push_back(p);
    reg.active = std::move(next);
  }
  if (r.previousProfiledRuns) releaseFirstCallPolicy();
}

namespace {

struct LoadTime {
  std::optional<ExecutorRegistration> reg;
  LoadTime() {
    if (envFlag("TSFUSE_DISABLE", false)) return;
    if (runtimeTorchVersion() != builtTorchVersion()) {
      // Refuse loudly: our kernels and passes are compiled against one torch's headers.
      std::cerr << "tsfuse: error: built against torch " << builtTorchVersion() << " but loaded into torch "
                << runtimeTorchVersion() << "; the graph pass is NOT registered (rebuild tsfuse for this torch)\n";
      return;
    }
    try {
      reg = registerExecutorPass(optionsFromEnvironment(), firstCallSetting() != FirstCall::Off);
    } catch (const std::exception& e) {
      std::cerr << "tsfuse: error: " << e.what() << "; the graph pass is NOT registered\n";
    }
  }
};

LoadTime& loadTime() {
  static LoadTime instance;
  return instance;
}

// Runs at library load (dlopen or program start).
const bool kRegisteredAtLoad = (loadTime(), true);

}  // namespace

std::optional<ExecutorRegistration> loadTimeRegistration() { return loadTime().reg; }

}  // namespace tsfuse
