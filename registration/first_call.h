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
// TORCHSCRIPT_FUNCTION before they reach the executor. An observer of that scope, at the first
// call of a method whose inlined graph has nothing the pipeline could fuse (the executor pass's
// own test, executorMayFuse), lends the graph PyTorch's count and takes it back as soon as the
// executor has read it: when the executor instruments a graph whose self is of that method's
// class (a RegisterProfilingNode query) or, at the latest, when the call returns. Everything else
// keeps 0: methods with candidates, free functions, and Python's calls of scripted methods
// (Python reaches the executor without that record; the interpreter's own frame record comes
// after the plan is chosen, so the observer sees the method optimized and leaves it).
//
// In a process where Python is running at load, the observer is not installed: Python's calls
// are what it would see, and it can attribute none of them (it would cost each ~0.8 us).
//
// The count is one process-wide value: a fusible graph that another thread instruments inside
// that window gets PyTorch's count, i.e. its first call runs unfused (same results; fused from
// its second call). The window is runProfilingInsensitiveOptimizations of the candidate-free
// graph (milliseconds), not its execution.
#pragma once

#include <cstddef>

namespace tsfuse {

// First-call mode is held by the registrations that asked for it (reference-counted). The first
// sets the count to 0 and installs the observer, and returns the count it found (PyTorch's, lent
// to graphs with nothing to fuse); the last puts that count back. Later ones return it too.
size_t acquireFirstCallPolicy();
void releaseFirstCallPolicy();

// Counters for tests: method graphs the observer gave PyTorch's count / left in first-call mode.
struct FirstCallStats {
  size_t profiled = 0;
  size_t firstCall = 0;
};
FirstCallStats firstCallStats();

}  // namespace tsfuse
