// IR-string tests of note_stored_broadcasts: each broadcast a graph still stores after the
// pipeline is a rejection naming the node and why (so optimize-ts never says "nothing to fuse"
// of such a method), the pass changes nothing, and what stores no broadcast gets no note.
#include "ir_util.h"

#include "passes/note_stored_broadcasts.h"

namespace ir_note_stored_broadcasts_test {

namespace {

using namespace tsfuse_test;

constexpr const char* kPass = "note_stored_broadcasts";

std::vector<const tsfuse::FusionEvent*> notes(const PassRun& r) {
  std::vector<const tsfuse::FusionEvent*> out;
  for (const auto& e : r.events)
    if (e.pass == kPass) out.push_back(&e);
  return out;
}

// k-means assignment as a library writes it: both operands expanded to [n, k, d] and flattened
// for F.pairwise_distance, then viewed back and reduced.
std::shared_ptr<Graph> expandedPairwiseDistance() {
  return graphWithConstants("%x : Tensor, %c : Tensor, %n : int, %k : int, %d : int", R"IR(
  %x1 : Tensor = aten::unsqueeze(%x, %one)
  %c1 : Tensor = aten::unsqueeze(%c, %zero)
  %sizes : int[] = prim::ListConstruct(%n, %k, %d)
  %xe : Tensor = aten::expand(%x1, %sizes, %false)
  %ce : Tensor = aten::expand(%c1, %sizes, %false)
  %flat : int[] = prim::ListConstruct(%m1, %d)
  %xr : Tensor = aten::reshape(%xe, %flat)
  %cr : Tensor = aten::reshape(%ce, %flat)
  %p : Tensor = aten::pairwise_distance(%xr, %cr, %p2, %eps, %false)
  %nk : int[] = prim::ListConstruct(%n, %k)
  %v : Tensor = aten::view(%p, %nk)
  %a : Tensor = aten::argmin(%v, %one, %false)
  return (%a)
)IR",
                            "  %eps : float = prim::Constant[value=1e-06]()\n"
                            "  %p2 : float = prim::Constant[value=2.]()\n",
                            /*named=*/true);
}

TEST(NoteStoredBroadcasts, CopiesOfExpandedValuesAreNamed) {
  auto g = expandedPairwiseDistance();
  PassRun r = runPipelineOn(g);
  // pairwise_distance decomposes and its sub/add/norm fuse over the copies; the copies stay (the
  // argmin over the stored view is native_extrema's).
  EXPECT_EQ(r.rewritesBy("fuse_broadcast_reduce"), 1) << r.dump();
  EXPECT_EQ(r.rewrites(), 2) << r.dump();
  std::vector<const tsfuse::FusionEvent*> n = notes(r);
  ASSERT_EQ(n.size(), 2u) << r.dump();
  for (const tsfuse::FusionEvent* e : n) {
    EXPECT_EQ(e->kind, tsfuse::FusionEvent::Kind::Reject);
    EXPECT_EQ(e->nodes.size(), 2u);  // the expand and the copy
    EXPECT_NE(e->reason.find("aten::reshape copies the broadcast aten::expand made"), std::string::npos) << e->reason;
  }
  EXPECT_EQ(n[0]->nodeIds, (std::vector<std::string>{"%xe", "%xr"}));
  EXPECT_EQ(n[1]->nodeIds, (std::vector<std::string>{"%ce", "%cr"}));
}

TEST(NoteStoredBroadcasts, ChangesNothing) {
  auto g = expandedPairwiseDistance();
  const std::string before = g->toString();
  PassRun r = runPass(g, tsfuse::NoteStoredBroadcasts);
  EXPECT_FALSE(r.changed);
  EXPECT_EQ(r.ir, before);
  EXPECT_EQ(notes(r).size(), 2u) << r.dump();
}

TEST(NoteStoredBroadcasts, RepeatReadByAnUnfusedOpIsNamed) {
  // A repeat read by one fused op becomes a view (tsfuse::broadcast_repeat; no note, below); read
  // by an op left unfused (its reader is a matmul), the copy stays, and is named.
  auto g = graphWithConstants("%x : Tensor, %y : Tensor, %w : Tensor, %n : int", R"IR(
  %x1 : Tensor = aten::unsqueeze(%x, %one)
  %y1 : Tensor = aten::unsqueeze(%y, %zero)
  %reps : int[] = prim::ListConstruct(%n, %one, %one)
  %yr : Tensor = aten::repeat(%y1, %reps)
  %s : Tensor = aten::sub(%x1, %yr, %one)
  %m : Tensor = aten::matmul(%s, %w)
  return (%m)
)IR",
                              "", /*named=*/true);
  PassRun r = runPipelineOn(g);
  EXPECT_EQ(r.rewrites(), 0) << r.dump();
  std::vector<const tsfuse::FusionEvent*> n = notes(r);
  ASSERT_EQ(n.size(), 1u) << r.dump();
  EXPECT_EQ(n[0]->nodeIds, std::vector<std::string>{"%yr"});
  EXPECT_NE(n[0]->reason.find("aten::repeat copies its input"), std::string::npos) << n[0]->reason;
}

TEST(NoteStoredBroadcasts, UnfusedOuterProductWithKnownSizesIsNamed) {
  // A traced graph's sizes: [4, 1, 3] - [1, 5, 3] read by a matmul (no region holds one).
  auto g = graphWithConstants("%a : Float(4, 1, 3), %b : Float(1, 5, 3), %w : Float(3, 2)", R"IR(
  %s : Float(4, 5, 3) = aten::sub(%a, %b, %one)
  %m : Float(4, 5, 2) = aten::matmul(%s, %w)
  return (%m)
)IR",
                              "", /*named=*/true);
  PassRun r = runPipelineOn(g);
  std::vector<const tsfuse::FusionEvent*> n = notes(r);
  ASSERT_EQ(n.size(), 1u) << r.dump();
  EXPECT_EQ(n[0]->nodeIds, std::vector<std::string>{"%s"});
  EXPECT_NE(n[0]->reason.find("broadcasts [4, 1, 3] against [1, 5, 3] and stays unfused"), std::string::npos)
      << n[0]->reason;
  EXPECT_NE(n[0]->reason.find("read by aten::matmul"), std::string::npos) << n[0]->reason;
}

TEST(NoteStoredBroadcasts, UnfusedOuterProductOfNewDimsIsNamedWithoutSizes) {
  // A scripted graph has no sizes: c[:, None] - lt[None] (new dims 1 and 0) read by a cat.
  auto g = graphWithConstants("%c : Tensor, %lt : Tensor, %rb : Tensor", R"IR(
  %c1 : Tensor = aten::unsqueeze(%c, %one)
  %l0 : Tensor = aten::unsqueeze(%lt, %zero)
  %r0 : Tensor = aten::unsqueeze(%rb, %zero)
  %s1 : Tensor = aten::sub(%c1, %l0, %one)
  %s2 : Tensor = aten::sub(%r0, %c1, %one)
  %pieces : Tensor[] = prim::ListConstruct(%s1, %s2)
  %cat : Tensor = aten::cat(%pieces, %two)
  %dims2 : int[] = prim::ListConstruct(%two)
  %m : Tensor = aten::amin(%cat, %dims2, %false)
  return (%m)
)IR",
                              "", /*named=*/true);
  PassRun r = runPipelineOn(g);
  std::vector<const tsfuse::FusionEvent*> n = notes(r);
  ASSERT_EQ(n.size(), 2u) << r.dump();
  EXPECT_EQ(n[0]->nodeIds, std::vector<std::string>{"%s1"});
  EXPECT_NE(n[0]->reason.find("broadcasts %c with a new dim 1 against %lt with a new dim 0"), std::string::npos)
      << n[0]->reason;
  EXPECT_NE(n[1]->reason.find("broadcasts %rb with a new dim 0 against %c with a new dim 1"), std::string::npos)
      << n[1]->reason;
  EXPECT_NE(n[0]->reason.find("read by aten::cat"), std::string::npos) << n[0]->reason;
}

TEST(NoteStoredBroadcasts, CompositeOpOverAnOuterProductIsNamed) {
  // SimCLR's similarity matrix: cosine_similarity(z[:, None, :], z[None, :, :], dim=-1), an op the
  // passes neither fuse nor decompose, over operands that broadcast: named, not "nothing to fuse".
  auto g = graphWithConstants("%z : Tensor", R"IR(
  %a : Tensor = aten::unsqueeze(%z, %one)
  %b : Tensor = aten::unsqueeze(%z, %zero)
  %s : Tensor = aten::cosine_similarity(%a, %b, %m1, %eps)
  return (%s)
)IR",
                              "  %eps : float = prim::Constant[value=1e-08]()\n", /*named=*/true);
  PassRun r = runPipelineOn(g);
  std::vector<const tsfuse::FusionEvent*> n = notes(r);
  ASSERT_EQ(n.size(), 1u) << r.dump();
  EXPECT_EQ(n[0]->nodeIds, std::vector<std::string>{"%s"});
  EXPECT_NE(n[0]->reason.find("aten::cosine_similarity"), std::string::npos) << n[0]->reason;
  EXPECT_NE(n[0]->reason.find("broadcast to an outer product (%z with a new dim 1 against %z with a new dim 0)"),
            std::string::npos)
      << n[0]->reason;
  // The same op over operands of one shape broadcasts nothing: no note.
  auto plain = graphWithConstants("%x : Tensor, %y : Tensor", R"IR(
  %s : Tensor = aten::cosine_similarity(%x, %y, %m1, %eps)
  return (%s)
)IR",
                                  "  %eps : float = prim::Constant[value=1e-08]()\n", /*named=*/true);
  EXPECT_TRUE(notes(runPipelineOn(plain)).empty());
}

TEST(NoteStoredBroadcasts, NoNoteWhereNothingBroadcastIsStored) {
  struct Case {
    const char* name;
    const char* signature;
    const char* body;
  };
  const Case cases[] = {
      // An expanded operand read in place by a fused region: nothing copied.
      {"expand read by a region", "%x : Tensor, %y : Tensor, %n : int", R"IR(
  %x1 : Tensor = aten::unsqueeze(%x, %one)
  %sizes : int[] = prim::ListConstruct(%n, %m1)
  %xe : Tensor = aten::expand(%x1, %sizes, %false)
  %s : Tensor = aten::sub(%xe, %y, %one)
  %a : Tensor = aten::abs(%s)
  %d : Tensor = aten::sum(%a, %dims1, %false, %none)
  return (%d)
)IR"},
      // A reshape of a value no expand made.
      {"reshape of a plain value", "%x : Tensor, %d : int", R"IR(
  %flat : int[] = prim::ListConstruct(%m1, %d)
  %r : Tensor = aten::reshape(%x, %flat)
  %e : Tensor = aten::exp(%r)
  return (%e)
)IR"},
      // torchmetrics' manhattan distance: the repeat one fused op reads is a view
      // (tsfuse::broadcast_repeat), so nothing is copied.
      {"repeat read by a region", "%x : Tensor, %y : Tensor, %n : int", R"IR(
  %x1 : Tensor = aten::unsqueeze(%x, %one)
  %y1 : Tensor = aten::unsqueeze(%y, %zero)
  %reps : int[] = prim::ListConstruct(%n, %one, %one)
  %yr : Tensor = aten::repeat(%y1, %reps)
  %s : Tensor = aten::sub(%x1, %yr, %one)
  %a : Tensor = aten::abs(%s)
  %dims : int[] = prim::ListConstruct(%m1)
  %d : Tensor = aten::sum(%a, %dims, %false, %none)
  return (%d)
)IR"},
      // A repeat returned, never computed with.
      {"repeat only returned", "%x : Tensor, %n : int", R"IR(
  %reps : int[] = prim::ListConstruct(%n, %one)
  %r : Tensor = aten::repeat(%x, %reps)
  return (%r)
)IR"},
      // Same sizes: no broadcast to store.
      {"same sizes", "%a : Float(4, 5), %b : Float(4, 5), %w : Float(5, 2)", R"IR(
  %s : Float(4, 5) = aten::sub(%a, %b, %one)
  %m : Float(4, 2) = aten::matmul(%s, %w)
  return (%m)
)IR"},
      // Sizes not known: nothing proven, nothing claimed.
      {"unknown sizes", "%a : Tensor, %b : Tensor, %w : Tensor", R"IR(
  %s : Tensor = aten::sub(%a, %b, %one)
  %m : Tensor = aten::matmul(%s, %w)
  return (%m)
)IR"},
  };
  for (const Case& c : cases) {
    auto g = graphWithConstants(c.signature, c.body, "", /*named=*/true);
    PassRun r = runPipelineOn(g);
    EXPECT_TRUE(notes(r).empty()) << c.name << "\n" << r.dump();
  }
}

}  // namespace

}  // namespace ir_note_stored_broadcasts_test
