// The generated kernel of one fused call: the typed program for the device (or, for the runs
// against eager CPU on PoCL, with the CPU kernels' rules), the skeleton picked from the call's
// iteration plan (kernels/plan/iteration.h), its text, and the values of its index parameters.
// Shared by the CUDA runtime path and the OpenCL test driver, so both bind the same parameters.
#pragma once

#include "kernels/backends/cuda/codegen/emit.h"
#include "kernels/plan/iteration.h"

namespace tsfuse::cuda {

// 32-bit kernels need every offset, count and grid-stride step below 2^31: launchers keep a
// grid's threads under this many.
constexpr int64_t kMaxGridThreads = int64_t(1) << 24;

struct CallKernel {
  lower::Program program;
  std::optional<lower::Program> epilogue;  // over (reduced value, epilogue operands...)
  KernelSpec spec;
  KernelSource source;
  int64_t numOut = 0, count = 0;
  std::vector<int64_t> index;  // the Index parameters, in the kernel's order (emit.h)
};

struct CallOptions {
  bool cudaRules = true;        // false: the CPU kernels' rules (runs against eager CPU)
  std::optional<bool> index64;  // force the index width (tests); default: 32-bit when it fits
  std::optional<Kind> kind;     // force a skeleton (tests); declines where it does not apply
};

// The grid a kernel runs on: `blocks` blocks of `threads` threads. The skeletons' grid-stride
// loops cover any count, so the grid is capped at `maxBlocks` (and at kMaxGridThreads threads,
// which 32-bit kernels rely on). A map and a thread-per-output reduction give each thread an
// output; a block reduction gives each block one.
struct LaunchShape {
  int64_t blocks = 0;
  int threads = 0;
};
LaunchShape launchShape(const CallKernel& k, int64_t maxBlocks);

// A host operand's value (a 0-dim CPU tensor under CUDA rules) as the kernel's parameter takes
// it: in its local type, so float for float16/bfloat16.
struct HostArg {
  alignas(8) unsigned char bytes[8] = {};
  size_t size = 0;
};
HostArg hostArg(const Param& p, const at::Tensor& value);

// The bytes of every parameter that does not depend on where memory lives, in k's order: index
// parameters in the kernel's index width, host values (hostArg). Out and Data parameters are
// left empty (size 0) for the launcher to bind its buffers.
std::vector<HostArg> valueArgs(const CallKernel& k, at::TensorList operands);

// nullopt (the reason in *why) when the call has no generated kernel: a dtype, primitive or
// reduction without a device form, an epilogue that changes the reduced shape, or a plan no
// native path walks.
std::optional<CallKernel> kernelForCall(const Expr& e, at::TensorList operands, const ReduceSpec* reduce,
                                        const Analysis& an, const IterationPlan& plan, const CallOptions& opt,
                                        std::string* why);

}  // namespace tsfuse::cuda
