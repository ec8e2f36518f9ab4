// Whether a region may be replaced by one op placed later in its block (see region_hazards.h).
#include "passes/regions/region_hazards.h"

#include "passes/analysis/read_hazards.h"
#include "passes/framework/events.h"

namespace tsfuse {

std::string regionHazard(const Region& r, Node* at, AliasDb& aliasDb) {
  if (std::string h = readHazard(r.operands, r.nodes.front(), at, aliasDb); !h.empty()) return h;
  // A value of the region written through an alias (y = x.to(x.dtype) is x itself; y.mul_(0))
  // before the fused op computes it afresh: its readers after the write saw the written value.
  std::vector<Value*> values;
  for (Node* n : r.nodes) values.push_back(n->output());
  if (Node* w = writerBetween(values, r.nodes.front(), at, aliasDb))
    return "a value of the region (or a tensor it may alias) is written by an in-place op (" + describeNode(w) +
           ") before the fused op would compute it";
  return "";
}

std::optional<Region> hazardFreeRegion(Node* producer, Node* consumer, Rewriter& rw) {
  Region r = growRegion(producer);
  std::string hazard = regionHazard(r, consumer, rw.aliasDb());
  if (hazard.empty()) return r;
  std::vector<Node*> nodes = {consumer};
  nodes.insert(nodes.end(), r.nodes.begin(), r.nodes.end());
  rw.notifyMatchFailure(nodes, hazard);
  return std::nullopt;
}

}  // namespace tsfuse
