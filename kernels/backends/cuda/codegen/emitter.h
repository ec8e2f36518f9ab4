// The writer of one generated kernel (internal to kernels/backends/cuda/codegen): the parameter list, the
// straight-line code of each typed program spliced in, and the skeleton around it. emit.cpp has
// the common parts and the map skeleton, emit_reduce.cpp the reductions.
#pragma once

#include "kernels/backends/cuda/codegen/emit.h"
#include "kernels/backends/cuda/codegen/prim_text.h"

#include <string>
#include <vector>

namespace tsfuse::cuda::detail {

inline std::string str(int v) { return std::to_string(v); }

// One typed program in the kernel. Its slots are `const` locals named <pre>a<slot> (operands)
// and <pre>v<slot> (literals and results); its data operands are the parameters <pre>in<leaf>.
// `firstLeaf`: the leaves before it are not read from memory (an epilogue's leaf 0 is the
// reduced value); `operandBase`: the fused op's operand index of leaf 0.
struct Code {
  const lower::Program* p = nullptr;
  std::vector<Ty> slot;
  std::string pre;
  int firstLeaf = 0, operandBase = 0;
  std::string name(int s) const { return pre + (s < p->numLeaves ? "a" : "v") + str(s); }
  bool data(int l) const { return l >= firstLeaf && !p->hostLeaf[l]; }
};

struct Emitter {
  Emitter(const lower::Program& prog, const lower::Program* epilogue, const KernelSpec& s);

  const KernelSpec& spec;
  Code main, epi;
  bool hasEpilogue = false;
  std::string idx;  // the index type
  std::string why;
  std::vector<Param> params;
  std::vector<std::string> paramText;
  std::string code;
  int depth = 1;

  bool fail(std::string reason) {
    why = std::move(reason);
    return false;
  }
  void line(const std::string& l) { code += std::string(2 * depth, ' ') + l + "\n"; }
  void open(const std::string& l) {
    line(l);
    ++depth;
  }
  void close() {
    --depth;
    line("}");
  }

  bool types(Code& c);
  // Parameters: the outputs of types `outs`, every program's data operands and host values, then
  // the index parameters (emit.h's order).
  void declareParams(const std::vector<Ty>& outs);
  // Coordinates <c><d> of linear index `lin` over sizes <size><d> (innermost last), and each of
  // c's data operands' offset <off><l> = [<base><l> +] sum <c><d> * <pre><stride><l>_<d>.
  void offsets(const Code& c, const std::string& lin, const std::string& coord, const std::string& size,
               const std::string& stride, int rank, const std::string& base, const std::string& off);
  // Leaf l of c read at element `offset` (a host value: its parameter), as its local type.
  std::string load(const Code& c, int l, const std::string& offset) const;
  void declareLeaf(const Code& c, int l, const std::string& value);
  void loads(const Code& c, const std::string& off);  // every leaf at offset <off><l>
  // c's literal k, read from its parameter as its local type.
  std::string literalText(const Code& c, int k) const;
  // c's straight-line code; its value is in c.name(c.p->result).
  bool body(const Code& c);
  // The epilogue over the reduced value `value` for output o, stored to out[o]; or the value.
  bool storeResult(const std::string& value, Ty valueTy);

  std::string gridStart() const { return "(" + idx + ")(TSF_BID * TSF_BDIM + TSF_TID)"; }
  std::string gridStep() const { return "(" + idx + ")(TSF_GDIM * TSF_BDIM)"; }

  bool map();
  bool pair2();
  bool reduce();  // emit_reduce.cpp: ReduceThread, ReduceBlock, Gemm
};

}  // namespace tsfuse::cuda::detail
