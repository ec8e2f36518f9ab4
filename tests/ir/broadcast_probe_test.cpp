// IR-string tests of firstBroadcastCandidate (passes/analysis/broadcast_probe.h): which first calls store a
// broadcast intermediate that fusion removes, judged from the call's values. Positives: the
// mission's outer products (unsqueezed operands, a transposed column or chunk, operands the caller
// shaped, expanded or repeated operands, rows of an unknown count, an operand through an If), and
// one inside an If. Named negatives: what the detectors' inference holds (a column times a matrix,
// the anchor grid that is stored anyway), same-shape regions, and operands of unknown rank. Each
// positive also checks the pipeline: its graph is fused, so the two cannot drift apart.
#include "ir_util.h"

#include "passes/analysis/broadcast_probe.h"
#include "registration/pipeline.h"

namespace ir_broadcast_probe_test {

namespace {

using namespace tsfuse_test;
using torch::jit::Node;

// The constants the cases use besides the common ones.
constexpr const char* kExtra = R"IR(
  %three : int = prim::Constant[value=3]()
  %four : int = prim::Constant[value=4]()
  %five : int = prim::Constant[value=5]()
  %six : int = prim::Constant[value=6]()
  %dimsm1 : int[] = prim::Constant[value=[-1]]()
  %grid : int[] = prim::Constant[value=[6, 5, 3]]()
)IR";

struct Case {
  const char* name;
  std::string body;
  std::vector<std::vector<int64_t>> sizes;  // of %x and %y at the call
  const char* candidate;                    // the node kind the probe returns, or "none"
};

// gtest prints a parameter it has no printer for byte by byte, and a std::string's unused buffer
// bytes are uninitialised (valgrind's memcheck entry reports them): the case prints its name.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// `prefix`, then |a - b| summed over the last dim: the distance every pairwise case ends with.
std::string absDistances(const std::string& prefix, const std::string& a, const std::string& b) {
  return prefix + "  %d : Tensor = aten::sub(" + a + ", " + b + ", %one)\n" +
         "  %e : Tensor = aten::abs(%d)\n"
         "  %s : Tensor = aten::sum(%e, %dimsm1, %false, %none)\n"
         "  return (%s)";
}

// x[:, None, :] - y[None, :, :] (x replaced by `x`), the seed's pairwise form, then `then`.
std::string unsqueezedPair(const std::string& x = "%x", const std::string& then = "") {
  return absDistances(then + "  %xa : Tensor = aten::unsqueeze(" + x +
                          ", %one)\n"
                          "  %yb : Tensor = aten::unsqueeze(%y, %zero)\n",
                      "%xa", "%yb");
}

const std::string kPlainDistances = absDistances("", "%x", "%y");

const Case kCases[] = {
    {"UnsqueezedOperands", unsqueezedPair(), {{6, 3}, {5, 3}}, "aten::sub"},
    {"OperandsTheCallerShaped", kPlainDistances, {{6, 1, 3}, {1, 5, 3}}, "aten::sub"},
    {"SameShapes", kPlainDistances, {{6, 5, 3}, {6, 5, 3}}, "none"},
    {"OneOperandBroadcast", kPlainDistances, {{6, 1, 3}, {6, 5, 3}}, "none"},
    // The seed IoU: torch.min(y_max1, y_max2.t()) with y_max = boxes[:, 3:4].
    {"TransposedColumn",
     R"IR(
  %a : Tensor = aten::slice(%x, %one, %three, %four, %one)
  %b : Tensor = aten::slice(%y, %one, %three, %four, %one)
  %bt : Tensor = aten::t(%b)
  %m : Tensor = aten::min(%a, %bt)
  %c : Tensor = aten::clamp(%m, %zero, %none)
  %r : Tensor = aten::mul(%c, %c)
  return (%r))IR",
     {{6, 4}, {5, 4}},
     "aten::min"},
    // The seed's own spelling: boxes.chunk(4, dim=1), then min(y_max1, y_max2.t()).
    {"ChunkedColumnsTransposed",
     R"IR(
  %p : Tensor[] = aten::chunk(%x, %four, %one)
  %x1 : Tensor, %y1 : Tensor, %x2 : Tensor, %y2 : Tensor = prim::ListUnpack(%p)
  %q : Tensor[] = aten::chunk(%y, %four, %one)
  %a1 : Tensor, %b1 : Tensor, %a2 : Tensor, %b2 : Tensor = prim::ListUnpack(%q)
  %t : Tensor = aten::t(%b2)
  %m : Tensor = aten::min(%y2, %t)
  %t1 : Tensor = aten::t(%b1)
  %n : Tensor = aten::max(%y1, %t1)
  %h : Tensor = aten::sub(%m, %n, %one)
  %c : Tensor = aten::clamp(%h, %zero, %none)
  return (%c))IR",
     {{6, 4}, {5, 4}},
     "aten::min"},
    // Materialized with repeat (xr = x.unsqueeze(1).repeat(1, M, 1)), then a region over them.
    {"RepeatedOperands",
     absDistances(R"IR(
  %xu : Tensor = aten::unsqueeze(%x, %one)
  %yu : Tensor = aten::unsqueeze(%y, %zero)
  %m : int = aten::size(%y, %zero)
  %n : int = aten::size(%x, %zero)
  %r1 : int[] = prim::ListConstruct(%one, %m, %one)
  %r2 : int[] = prim::ListConstruct(%n, %one, %one)
  %xr : Tensor = aten::repeat(%xu, %r1)
  %yr : Tensor = aten::repeat(%yu, %r2)
)IR",
                  "%xr", "%yr"),
     {{6, 3}, {5, 3}},
     "aten::sub"},
    // torchvision's BoxCoder.decode_single: dx * widths[:, None] + ctr_x[:, None].
    {"ColumnTimesMatrix",
     R"IR(
  %w : Tensor = aten::select(%x, %one, %two)
  %wc : Tensor = aten::unsqueeze(%w, %one)
  %p : Tensor = aten::mul(%y, %wc)
  %q : Tensor = aten::add(%p, %wc, %one)
  %e : Tensor = aten::exp(%q)
  return (%e))IR",
     {{6, 4}, {6, 91}},
     "none"},
    // AnchorGenerator: (shifts.view(-1, 1, 4) + base_anchors.view(1, -1, 4)).reshape(-1, 4) is
    // an outer product, but the output itself: nothing to remove.
    {"OuterProductThatIsTheOutput",
     R"IR(
  %l1 : int[] = prim::ListConstruct(%m1, %one, %four)
  %l2 : int[] = prim::ListConstruct(%one, %m1, %four)
  %lr : int[] = prim::ListConstruct(%m1, %four)
  %a : Tensor = aten::view(%x, %l1)
  %b : Tensor = aten::view(%y, %l2)
  %s : Tensor = aten::add(%a, %b, %one)
  %r : Tensor = aten::reshape(%s, %lr)
  return (%r))IR",
     {{6, 4}, {5, 4}},
     "none"},
    {"ExpandedOperands",
     absDistances(R"IR(
  %xa : Tensor = aten::unsqueeze(%x, %one)
  %yb : Tensor = aten::unsqueeze(%y, %zero)
  %xe : Tensor = aten::expand(%xa, %grid, %false)
  %ye : Tensor = aten::expand(%yb, %grid, %false)
)IR",
                  "%xe", "%ye"),
     {{6, 3}, {5, 3}},
     "aten::sub"},
    // Rows kept by a count the probe cannot follow (a data-dependent number of detections).
    {"RowsOfUnknownCount",
     unsqueezedPair("%rows", R"IR(
  %k : int = aten::numel(%y)
  %rows : Tensor = aten::slice(%x, %zero, %zero, %k, %one)
)IR"),
     {{6, 3}, {5, 3}},
     "aten::sub"},
    // Operands of a rank the probe cannot follow (mm's): nothing to judge.
    {"OperandsOfUnknownRank", unsqueezedPair("%m", "  %m : Tensor = aten::mm(%x, %y)\n"), {{6, 3}, {3, 3}}, "none"},
    // torchvision's _upcast: an If that returns its input, or a converted copy of it.
    {"ThroughAnUpcastIf",
     unsqueezedPair("%xs", R"IR(
  %f : bool = aten::is_floating_point(%x)
  %xs : Tensor = prim::If(%f)
    block0():
      -> (%x)
    block1():
      %xc : Tensor = aten::to(%x, %six, %false, %false, %none)
      -> (%xc)
)IR"),
     {{6, 3}, {5, 3}},
     "aten::sub"},
    {"InsideAnIf",
     R"IR(
  %c : bool = aten::gt(%three, %two)
  %r : Tensor = prim::If(%c)
    block0():
      %xa : Tensor = aten::unsqueeze(%x, %one)
      %yb : Tensor = aten::unsqueeze(%y, %zero)
      %d : Tensor = aten::sub(%xa, %yb, %one)
      %a : Tensor = aten::abs(%d)
      %s : Tensor = aten::sum(%a, %dimsm1, %false, %none)
      -> (%s)
    block1():
      -> (%x)
  return (%r))IR",
     {{6, 3}, {5, 3}},
     "aten::sub"},
};

class BroadcastProbeIR : public ::testing::TestWithParam<Case> {};

TEST_P(BroadcastProbeIR, FindsTheOuterProductsARegionRemoves) {
  const Case& c = GetParam();
  auto g = graphWithConstants("%x : Tensor, %y : Tensor", c.body, kExtra);
  std::vector<c10::IValue> inputs;
  for (const auto& s : c.sizes) inputs.emplace_back(at::zeros(s));
  const Node* n = tsfuse::firstBroadcastCandidate(g, inputs);
  EXPECT_STREQ(n ? n->kind().toQualString() : "none", c.candidate);
  if (std::string(c.candidate) != "none") {
    std::shared_ptr<Graph> copy = g->copy();
    tsfuse::runPipeline(copy, tsfuse::PipelineOptions{}, nullptr, "test");
    EXPECT_NE(copy->toString().find("tsfuse::"), std::string::npos) << *copy;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, BroadcastProbeIR, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// A stride-0 input (an expanded view the caller passes) is flat along its expanded axis.
TEST(BroadcastProbe, ExpandedInputsAreFlatWhereTheyRepeat) {
  auto g = graphWithConstants("%x : Tensor, %y : Tensor", kPlainDistances, kExtra);
  const at::Tensor x = at::zeros({6, 1, 3}).expand({6, 5, 3}), y = at::zeros({1, 5, 3}).expand({6, 5, 3});
  const Node* n = tsfuse::firstBroadcastCandidate(g, {x, y});
  EXPECT_STREQ(n ? n->kind().toQualString() : "none", "aten::sub");
  EXPECT_EQ(tsfuse::firstBroadcastCandidate(g, {at::zeros({6, 5, 3}), at::zeros({6, 5, 3})}), nullptr);
}

// Values of unknown kind (None for a tensor the caller did not pass) leave sizes unknown.
TEST(BroadcastProbe, MissingValuesAreUnknown) {
  auto g = graphWithConstants("%x : Tensor, %y : Tensor", unsqueezedPair(), kExtra);
  EXPECT_EQ(tsfuse::firstBroadcastCandidate(g, {at::zeros({6, 3})}), nullptr);
  EXPECT_EQ(tsfuse::firstBroadcastCandidate(g, {c10::IValue(), at::zeros({5, 3})}), nullptr);
}

}  // namespace

}  // namespace ir_broadcast_probe_test
