// The C text of each primitive (kernels/ir/prims.def) for the generated kernels: one generator
// per primitive, in a table built from prims.def itself, so every primitive has an entry and a
// new one does not build until it has a device form (or says it has none).
#pragma once

#include "kernels/backends/cuda/codegen/emit.h"
#include "kernels/ir/prim.h"

#include <string>

namespace tsfuse::cuda {

struct PrimArgs {
  Ty ct;                // the compute dtype (Cast: the target dtype)
  Ty from;              // Cast: the operand's dtype
  std::string a, b, c;  // operand expressions, already of dtype ct (Where: a is tsf_bool)
  bool cudaRules = true;
};

// The C expression of the primitive's value: of dtype ct, or tsf_bool for kBoolResult
// primitives; "" when the primitive has no device form for ct.
std::string primText(Prim p, const PrimArgs& args);

// x (of dtype from) converted to dtype to as c10::convert does (ATen's casts): floats to bool
// test != 0 (NaN is true), floats to uint8 go through int64, integers wrap, float16/bfloat16
// round to nearest even (their locals hold that value in float).
std::string convText(Ty from, Ty to, const std::string& x);

// A value of dtype t read from memory into its local (float16/bfloat16 widen to float), and a
// local written to memory (narrowed to the 16-bit pattern).
std::string loadText(Ty t, const std::string& x);
std::string storeText(Ty t, const std::string& x);

}  // namespace tsfuse::cuda
