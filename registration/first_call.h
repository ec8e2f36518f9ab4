// First-call mode, decided per method graph.
//
// The profiling executor reads the profiled-run count (torch::jit::getNumProfiledRuns) once per
// graph, when it instruments the graph at its first call; with 0 the first call builds the
// optimized plan, so our pre-pass fuses that call (the one that runs out of memory unfused). Set
// process-wide, 0 also moves PyTorch's own optimization of every model with nothing to fuse into
// its first call (ResNet-50: 208 -> 304 ms), which buys those models nothing.
//
// No custom pass runs before the executor reads the count, but torch::jit::Method::operator()
// and Method::run (how a LibTorch app calls a model) open a RecordFunction of scope
// TORCHSCRIPT_FUNCTION before they reach the executor, with the call's inputs. An observer of that
// scope, at the first call of a method that stores no broadcast intermediate a fusion would remove
// (firstCallCandidate: the pass is on and passes/analysis/broadcast_probe.h, following the sizes of this
// call's inputs, finds a region over an outer product), lends the graph PyTorch's count
// and takes it back as soon as the executor has read it: when the executor instruments a graph
// whose self is of that method's class (a RegisterProfilingNode query) or, at the latest, when
// the call returns. Everything else keeps 0: methods with candidates and free functions.
//
// Python reaches the executor without that record (the interpreter's own frame record comes
// after the plan is chosen), so in a process where Python is running at load the observer is not
// installed: it could attribute none of the calls it would see, and would cost each ~0.8 us.
// There the tsfuse package (python/tsfuse/_first_call.py) stands in for a scripted module's
// method until its first call and brackets that call with beginFirstCall/endFirstCall, the same
// decision (ops tsfuse::_first_call_begin/_end); after it, calls go straight to the method.
//
// The count is one process-wide value: a fusible graph that another thread instruments inside
// that window gets PyTorch's count, i.e. its first call runs unfused (same results; fused from
// its second call). The window is runProfilingInsensitiveOptimizations of the candidate-free
// graph (milliseconds), not its execution.
#pragma once

#include <ATen/core/ivalue.h>

#include <cstddef>
#include <optional>
#include <string>

namespace tsfuse {

// First-call mode is held by the registrations that asked for it (reference-counted). The first
// sets the count to 0 and installs the observer, and returns the count it found (PyTorch's, lent
// to first calls that store no broadcast intermediate); the last puts that count back. Later ones
// return it too.
size_t acquireFirstCallPolicy();
void releaseFirstCallPolicy();

// The first call of `self`'s method `method` with `args` (a tuple or list of the call's other
// inputs, in the method's order; nullopt where not known), made by this thread right after: lends
// the method's graph PyTorch's count when this is the method's first call and that call stores no
// broadcast intermediate to fuse; returns whether it did. endFirstCall takes a lent count back (if
// the executor has not already read it).
bool beginFirstCall(const c10::IValue& self, const std::string& method, const std::optional<c10::IValue>& args);
void endFirstCall();

// Counters for tests: method graphs the observer gave PyTorch's count / left in first-call mode.
struct FirstCallStats {
  size_t profiled = 0;
  size_t firstCall = 0;
};
FirstCallStats firstCallStats();

}  // namespace tsfuse
