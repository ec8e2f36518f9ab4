// A reduction's epilogue: the elementwise ops after it that read its value alone, planned as one
// expression the fused reduction computes on each reduced value before storing it.
#pragma once

#include "passes/analysis/op_table.h"

#include <string>
#include <vector>

namespace tsfuse {

// The elementwise ops after a reduction that consume its value alone: the longest run of them,
// in block order, whose values (the reduced one included) are read by nothing else but the last
// one, e.g. where(lt(d, 0.5), 0, d) reads d twice. As an expression over the reduced value ($0)
// and the ops' other operands ($1, ... = extra): a reduction's epilogue. An operand made by an
// elementwise op that only the epilogue reads joins it too, wherever it is in the block. `chain`
// is in block order.
struct Epilogue {
  std::vector<Node*> chain;
  Expr expr;
  std::vector<Value*> extra;  // tensors and runtime numbers
  // Why the walk stopped at a reader of the reduced value (or of a taken node) that it could not
  // take: "aten::div: scalar operand %s is not a constant"; empty where nothing stopped it. The
  // rewrite's event says it, so that --explain tells why the epilogue is no longer.
  std::string stop;
  // With standIn: the readers of the reduced value's metadata alone (prim::dtype of an IoU's
  // intersection for `torch.zeros(1, dtype=inter.dtype)`), which read a stand-in computed without
  // the value (tsfuse::shape_of.reduced) so that they do not keep it stored; without it they stop
  // the epilogue like any other reader.
  std::vector<Node*> metadataReaders;
};
Epilogue planEpilogue(Value* reduced, bool standIn = false);

}  // namespace tsfuse
