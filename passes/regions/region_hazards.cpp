// Whether a region may be replaced by one op placed later in its block (see region_hazards.h).
#include "passes/regions/region_hazards.h"

#include "passes/analysis/read_hazards.h"

namespace tsfuse {

std::string regionHazard(const Region& r, Node* at, AliasDb& aliasDb) {
  return readHazard(r.operands, r.nodes.front(), at, aliasDb);
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
