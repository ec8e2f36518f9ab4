// First-call mode, decided per method graph.
//
// The profiling executor reads the profiled-run count once per graph, at its first call; 0 makes
// that call build the optimized plan, so our pre-pass fuses it, but would also move PyTorch's
// optimization of models with nothing to fuse into their first call. So an observer of the
// TORCHSCRIPT_FUNCTION record lends PyTorch's count to the first call of a method with no
// candidate (firstCallCandidate) until the executor has read it; under Python, which opens no such
// record, the tsfuse package brackets that call with beginFirstCall/endFirstCall. The count is
// process-wide: a fusible graph another thread instruments in that window runs its first call
// unfused.
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
