// Compiling a parsed expression + its per-call Analysis into a bytecode Program (kernels/bytecode.h).
#pragma once

#include "kernels/analysis.h"
#include "kernels/bytecode.h"
#include "kernels/lower/program.h"

#include <optional>
#include <string>

namespace tsfuse::bc {

bool toDT(c10::ScalarType t, DT& out);
c10::ScalarType fromDT(DT t);

// nullopt (reason in *why) when an op or dtype has no bytecode form for this flavour; the caller
// then takes another exact path. With Flavour::Cuda, 0-dim CPU operands (which ATen's CUDA
// kernels read as host scalars) become preloaded registers; every other operand is a leaf loaded
// per element. `resultAs` (optional) appends a cast of the value to that dtype.
std::optional<Program> compile(const Expr& e, const Analysis& an, at::TensorList operands, Flavour flavour,
                               std::string* why, std::optional<c10::ScalarType> resultAs = std::nullopt);

// True when operand t is read as a host scalar by ATen's CUDA kernels (a 0-dim CPU tensor).
bool isCpuScalar(const at::Tensor& t);

}  // namespace tsfuse::bc
