// The iteration plan of one fused call: which dims of the broadcast shape the output keeps and
// which it reduces, the order they are walked in, and how each operand is read along them.
// Computed once per call from its Analysis, before any output is allocated, and read by every
// path (CPU drivers, CUDA host side, chunked ATen path). Kept dims are walked in the output's
// memory order (kept index o is output element o); reduced dims in dim order, so reduced index r is
// the row-major index argmax/argmin return and every fold runs r = 0, 1, ... (float sums' bits).
#pragma once

#include "kernels/reference/analysis.h"

#include <ATen/ATen.h>
#include <c10/util/DimVector.h>

#include <cstdint>
#include <vector>

namespace tsfuse {

// The ranks the native paths take (ATen's own limit for TensorIterator): the CPU gather walks a
// sub-space with an index array of this size. Larger ranks take the chunked path.
constexpr int kMaxDims = 25;

// Dims and per-dim strides hold their first few entries inline (c10::DimVector), so making a plan
// allocates little more than one vector per space: it runs once per call, tiny calls included.
using c10::DimVector;

// An operand seen through the broadcast shape: byte strides per dim of that shape (0 where the
// operand is broadcast). `data` is null where the plan was made without binding data (paths
// that only read the geometry, e.g. the chunked path on a device without native kernels).
struct BroadcastView {
  const char* data = nullptr;
  int64_t elemSize = 0;
  DimVector stride;

  BroadcastView() = default;
  BroadcastView(const at::Tensor& t, at::IntArrayRef shape, bool bindData = true);
};

// How tiles whose lanes run along the innermost dim of a space read one operand.
enum class Access : uint8_t {
  Uniform,   // stride 0 along the lanes: one element per tile, read where it is
  InPlace,   // consecutive elements along the lanes: read where they are
  Packed,    // strided along the lanes but the same for every row (stride 0 along every other
             // dim): copied once per call into a contiguous row, then read there
  Gathered,  // anything else: copied per tile
};

// A list of dims of the broadcast shape, walked row-major, with each operand's strides along them.
struct SubSpace {
  DimVector size;
  std::vector<DimVector> stride;  // [operand][dim], bytes

  static SubSpace select(const std::vector<BroadcastView>& views, at::IntArrayRef shape, at::IntArrayRef dims);
  int64_t numel() const;
  // Merges neighbouring dims that every operand walks as one (outer stride == inner stride *
  // size). The row-major linear index, and so the walk's order, is unchanged.
  void coalesce();
  // The space without its innermost dim (the rows of a tiling along that dim).
  SubSpace outer() const;
  // Whether operand o has no stride here: one element for the whole sub-space.
  bool constantFor(size_t o) const;
  // Whether operand o has stride 0 along every dim but the innermost (the same for every row).
  bool rowInvariant(size_t o) const;
  // How tiles along the innermost dim read operand o (elements of elemSize bytes).
  Access access(size_t o, int64_t elemSize) const;
  // Byte offset of linear index `lin` (row-major) for operand o.
  int64_t offset(size_t o, int64_t lin) const {
    int64_t off = 0;
    for (int j = static_cast<int>(size.size()) - 1; j >= 0; --j) {
      off += (lin % size[j]) * stride[o][j];
      lin /= size[j];
    }
    return off;
  }
};

// Where linear index o of a kept space whose two innermost dims were swapped
// (IterationPlan::withInnerKeptSwapped) lies in the output: the output's innermost dim has `inner`
// indices, the one outside it `outer`, and consecutive o along the swapped space's innermost dim
// are `inner` elements apart in the output.
struct InnerSwap {
  int64_t inner = 1, outer = 1;
  int64_t outputIndex(int64_t o) const {
    const int64_t plane = inner * outer, within = o % plane;
    return o - within + (within % outer) * inner + within / outer;
  }
};

struct IterationPlan {
  DimVector shape;        // the broadcast shape
  DimVector reducedDims;  // every reduced dim of it, sorted (size-1 dims included)
  // Kept dims of more than one index, outermost first in the output's memory, and the same dims
  // numbered as the output's own (they differ where keepdim=false drops the reduced dims).
  DimVector keptOrder, outOrder;
  DimVector reducedOrder;  // reduced dims of more than one index, in dim order

  std::vector<BroadcastView> views;  // the expression's operands
  // Kept dims: one per entry of keptOrder, not merged, because the CPU reduction picks its tiling
  // from the output's innermost dim (kernels/backends/cpu/reduce.cpp) and the tiling decides how a float
  // sum's partials combine. `merged`: the same space coalesced (maps and the CUDA kernels walk it).
  SubSpace kept, merged;
  SubSpace reduced;  // coalesced
  // Per operand: how tiles along the innermost dim of `kept` / of `merged` read it.
  c10::SmallVector<Access, 16> keptAccess, mergedAccess;

  // Epilogue operands ($1, $2, ... of the epilogue) over the output's shape and its dims in
  // memory order; only when the epilogue keeps the reduced shape (it then runs per output tile).
  std::vector<BroadcastView> epilogueViews;
  SubSpace epilogueSpace;

  // Why no native path can walk this call (nullptr when one can): a 0-dim value, a rank above
  // kMaxDims, a value that is not the operands' broadcast, or an output that is not dense.
  const char* unsupported = nullptr;

  // bindData: read the operands' data pointers (native paths); false leaves them null.
  static IterationPlan make(const Expr& e, at::TensorList operands, const ReduceSpec* reduce, const Analysis& an,
                            bool bindData);

  bool isReduced(int64_t d) const;
  int64_t numel() const;  // of the broadcast shape
  // The outermost kept dim (in dim order) with more than one index, or -1: the chunked path
  // slices the output along it.
  int64_t slabDim() const;
  // The same plan with the two innermost kept dims walked the other way round (kept, keptOrder,
  // outOrder, keptAccess and the epilogue's space): tiles along the innermost dim of `kept` then
  // run along the output's second-innermost dim, and linear index o of the kept space is no longer
  // the output's element o (see InnerSwap). Needs two kept dims.
  IterationPlan withInnerKeptSwapped() const;
};

}  // namespace tsfuse
