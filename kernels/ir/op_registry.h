// What the registry (kernels/ir/ops.def) says about each expression op, for every layer: the
// parser and validator (names, signatures), the passes (which ATen schemas become which op, the
// dtype facts canonicalization relies on), the analysis (compute dtypes) and the typed lowering
// (each op's rule and primitive). The ATen reference evaluation is in kernels/aten_eval.h.
#pragma once

#include "kernels/ir/expr.h"
#include "kernels/ir/prim.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace tsfuse {

enum OpTrait : uint32_t {
  kFloatValued = 1u << 0,  // its result is always floating
  kNeverBool = 1u << 1,    // its result is never bool
  kInPlace = 1u << 2,      // x.op_(numbers) may become x.op(numbers) (passes/canonicalize.cpp)
  kCompare = 1u << 3,      // computes in its operands' promoted dtype, returns bool
  kLogical = 1u << 4,      // tests its operands for truth (computes in bool), returns bool
  kMayAlias = 1u << 5,     // may return its input itself, not a fresh tensor
  kOpmathScalar = 1u << 6, // ATen's CUDA kernel reads a Python-number operand in the math type
  // Its Python-number operands may be known only at run time: ATen computes the op on a number
  // as on that number wrapped in a 0-dim tensor (the Scalar overloads wrap it), so the passes make
  // such a number a tsfuse::wrapped_number operand (passes/op_table.cpp).
  kRuntimeNumber = 1u << 7,
};

// How the typed lowering computes an op natively (kernels/lower/lower.cpp).
enum class LowerRule : uint8_t { Map, Relu, Clamp, Where, MaskedFill, To, Div, Square, Bitwise, Aten };

// How a TorchScript schema's inputs become the instruction's arguments (passes/op_table.cpp).
enum class AtenForm : uint8_t { Plain, Alpha, RevAlpha, DivMode, ClampMin, ClampMax, ToDtype };

struct OpDef {
  Op op;
  const char* name;
  const char* signature;  // per argument: v tensor or number, o the same or None, s number, d dtype
  uint32_t traits;
  LowerRule rule;
  int primId;  // the Map rule's primitive, -1 for none

  int arity() const;
  bool has(OpTrait t) const { return (traits & t) != 0; }
  std::optional<Prim> prim() const {
    return primId < 0 ? std::nullopt : std::optional<Prim>(static_cast<Prim>(primId));
  }
};

const OpDef& opDef(Op op);
// Every op, in registry order (the generated tests walk it).
const std::vector<OpDef>& allOps();

struct AtenOverload {
  Op op;
  const char* schema;  // "aten::add.Tensor"
  AtenForm form;
};
const std::vector<AtenOverload>& atenOverloads();

}  // namespace tsfuse
