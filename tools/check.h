// optimize-ts --check: inputs for forward (the module's example_inputs() or --input-shape specs,
// random with a fixed seed), then the original and the optimized module run on the same inputs
// and their outputs are compared recursively (tensors, tuples, lists, dicts, scalars).
#pragma once

#include <torch/csrc/jit/api/module.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tsfuse::tool {

// --input-shape NAME:D1,D2,...[@DTYPE]   (no dims, "NAME:" or "NAME:@int64", is a 0-dim tensor)
struct InputSpec {
  std::string name;
  std::vector<int64_t> sizes;
  c10::ScalarType dtype = c10::ScalarType::Float;
  std::string str() const;
};
InputSpec parseInputSpec(const std::string& text);    // throws ToolError(kExitUsage)
c10::ScalarType parseDType(const std::string& name);  // throws ToolError(kExitUsage)
std::string dtypeName(c10::ScalarType t);

struct CheckInputs {
  std::string source;                                   // "example_inputs" or "--input-shape"
  std::vector<c10::IValue> args;                        // positional (example_inputs)
  std::unordered_map<std::string, c10::IValue> kwargs;  // by name (--input-shape)
  std::vector<std::string> described;                   // "boxes1: float32[64, 4]"
};

// Inputs for `module`.forward: from `specs` when given (each tensor argument of forward needs one;
// non-tensor arguments need a default), else from the module's example_inputs() method; throws
// ToolError(kExitUsage) explaining --input-shape when neither applies.
CheckInputs makeCheckInputs(torch::jit::Module& module, const std::vector<InputSpec>& specs, uint64_t seed);

struct Difference {
  std::string where;  // "output", "output[1]", ...
  std::string what;   // "dtype float32 != float64", "3 of 1024 values differ, max abs diff ..."
};

// Time of forward on the check inputs: the first call (the one compared; it includes the
// executor's profiling and optimization) and the median of the calls after kWarmupCalls more.
struct Timing {
  double firstCallMs = 0;
  double medianMs = 0;
};
inline constexpr int kWarmupCalls = 2;
// Timed calls per module: at least kMinTimedCalls, at most kMaxTimedCalls, fewer than the maximum
// once both modules' timed calls took kTimingBudgetMs (a big model's steady state is stable sooner
// than ten calls of it are worth waiting for).
inline constexpr int kMinTimedCalls = 3, kMaxTimedCalls = 10;
inline constexpr double kTimingBudgetMs = 3000;

struct CheckResult {
  bool passed = false;
  CheckInputs inputs;
  double rtol = 0, atol = 0;
  int tensorsCompared = 0;
  double maxAbsDiff = 0;       // over all floating/integer tensors compared
  std::string optimizedError;  // the optimized module raised this (the original did not)
  std::vector<Difference> differences;
  Timing original, optimized;  // on the first input set; medianMs 0 when not measured
  int timedCalls = 0;          // calls per module behind medianMs (0: not measured)
  int runs = 1;                // input sets compared (--check=N)
  std::string device = "cpu";  // where both modules ran (--device)
};

// Runs both modules' forward (under NoGradGuard, on separate copies of the inputs, which are on
// `device`) and compares. Throws ToolError when the ORIGINAL module fails on the inputs (kExitUsage
// for --input-shape inputs, kExitIO for the module's own example_inputs()).
CheckResult runCheck(torch::jit::Module& original, torch::jit::Module& optimized, CheckInputs inputs,
                     c10::Device device, double rtol, double atol);

// --device: parses "cpu", "cuda" or "cuda:N"; throws ToolError(kExitUsage) for anything else or
// a device this machine does not have.
c10::Device parseCheckDevice(const std::string& text);

// --check=N: runs the comparison `runs` times, moving both modules and the inputs to `device`.
// Run 0 uses `base`; run i > 0 replaces every tensor of it by a random one of the same dtype and
// shape (seeded with seed + i). Differences of run i > 0 are reported as "run i: WHERE". Both
// modules are timed on run 0's inputs (Timing) unless one of them raised.
CheckResult runChecks(torch::jit::Module& original, torch::jit::Module& optimized, const CheckInputs& base, int runs,
                      uint64_t seed, c10::Device device, double rtol, double atol);

}  // namespace tsfuse::tool
