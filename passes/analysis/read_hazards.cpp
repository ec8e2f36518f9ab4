// In-place writes between two reads of the same values (see read_hazards.h).
#include "passes/analysis/read_hazards.h"

#include "passes/framework/events.h"

namespace tsfuse {

Node* writerBetween(const std::vector<Value*>& values, Node* from, Node* to, AliasDb& aliasDb) {
  TORCH_INTERNAL_ASSERT(from->owningBlock() == to->owningBlock() && !to->isBefore(from),
                        "writerBetween: the range must be in one block, in order");
  std::vector<Value*> written;
  for (Value* v : values)
    if (aliasDb.hasWriters(v)) written.push_back(v);  // cheap filter: most values have no writer
  if (written.empty()) return nullptr;
  const torch::jit::ValueSet set(written.begin(), written.end());
  for (Node* n = from->next(); n != to->next(); n = n->next())
    if (aliasDb.writesToAlias(n, set)) return n;
  return nullptr;
}

std::string readHazard(const std::vector<Value*>& values, Node* first, Node* at, AliasDb& aliasDb) {
  Node* w = writerBetween(values, first, at, aliasDb);
  if (!w) return "";
  for (Value* v : values)
    if (aliasDb.writesToAlias(w, {v}))
      return "operand %" + v->debugName() + " (or a tensor it may alias) is written by an in-place op (" +
             describeNode(w) + ") between the region's reads";
  return "an operand is written by an in-place op (" + describeNode(w) + ") between the region's reads";
}

}  // namespace tsfuse
