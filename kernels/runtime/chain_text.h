// The text form of a chain's stages (kernels/runtime/chain.h):
//
//   [squeeze() |> ][fused(<expr>; $<i> = value[.unsqueeze(<d>)...]) |> ]<reduction>(dim=..., keepdim=...[, dtype=...])[ |> <epilogue>]
//   softmax(dim=<d>) | log_softmax(dim=<d>) | div_sum(dim=<d>)
//
// where the reduction part is describe()'s form. Only later stages (k > 0) may squeeze first or
// be fused, not both, or normalize (the previous stage's value, as it is: NormalizeStage).
#pragma once

#include "kernels/runtime/chain.h"

namespace tsfuse {

struct StageText {
  bool squeeze = false;
  std::shared_ptr<const StageInput> input;  // a fused stage's input, else null
  std::optional<NormalizeStage> normalize;  // a normalizing stage (then `spec` is unused), else nullopt
  ReduceSpec spec;
};

// Stage k's text parsed; throws c10::Error naming the stage, its text and the reason.
StageText parseStage(const std::string& text, size_t k);
// The text of a stage (parseStage's inverse).
std::string stageText(bool squeeze, const StageInput* input, const ReduceSpec& spec);
std::string stageText(const NormalizeStage& normalize);

}  // namespace tsfuse
