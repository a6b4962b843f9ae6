// The PipeDream graph reader: every shipped profile, ordering and chaining rules, errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "dapple/common/error.h"
#include "dapple/format/profile.h"

namespace dapple {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string Node(const std::string& id, double fwd = 1, double act = 10) {
  return fmt::format(
      "{} -- layer {} -- forward_compute_time={}, backward_compute_time=2, activation_size={}, "
      "parameter_size=5\n",
      id, id, fwd, act);
}

std::vector<std::string> Ids(const Profile& p) {
  std::vector<std::string> ids;
  for (const LayerProfile& l : p.layers) ids.push_back(l.id);
  return ids;
}

std::string GraphErrorOf(const std::string& text, const std::string& source = "g.txt") {
  try {
    ParsePipeDreamGraph(text, source, 4);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

int CountNodeLines(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  int n = 0;
  while (std::getline(in, line))
    if (line.rfind("node", 0) == 0) ++n;
  return n;
}

TEST(PipeDreamGraph, EveryShippedProfileLoads) {
  int files = 0;
  for (const char* dir : {"dapple", "pipedream"}) {
    for (const auto& entry : fs::directory_iterator(fs::path(DAPPLE_DATA_DIR) / "profiles" / dir)) {
      const fs::path& path = entry.path();
      if (path.extension() != ".txt" || path.stem().string().rfind("LICENSE", 0) == 0) continue;
      SCOPED_TRACE(path.string());
      std::optional<int> pbs;
      if (!PbsFromFileName(path)) pbs = 32;  // files that do not name their batch size
      Profile p = LoadProfile(path, pbs);
      EXPECT_EQ(p.num_layers(), CountNodeLines(path));
      EXPECT_GT(p.batch_size, 0);
      for (auto [from, to] : p.edges) EXPECT_LT(from, to);
      // Every layer but the first has a predecessor after chaining.
      std::vector<bool> has_in(p.num_layers(), false);
      if (p.edges.empty()) std::fill(has_in.begin(), has_in.end(), true);
      for (auto [from, to] : p.edges) has_in[to] = true;
      int roots = static_cast<int>(std::count(has_in.begin(), has_in.end(), false));
      EXPECT_LE(roots, 3);  // gnmt has a few inputs that follow other inputs
      ++files;
    }
  }
  EXPECT_EQ(files, 27);  // 13 DAPPLE + 14 PipeDream profiles
}

TEST(PipeDreamGraph, PbsFromNameOrArgument) {
  fs::path bert = fs::path(DAPPLE_DATA_DIR) / "profiles/dapple/bert-48-pbs-2.txt";
  EXPECT_EQ(ReadPipeDreamGraph(bert, std::nullopt).batch_size, 2);
  EXPECT_EQ(ReadPipeDreamGraph(bert, 16).batch_size, 16);
  fs::path vgg = fs::path(DAPPLE_DATA_DIR) / "profiles/pipedream/vgg16.txt";
  try {
    ReadPipeDreamGraph(vgg, std::nullopt);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("--pbs"));
    EXPECT_THAT(e.what(), HasSubstr("vgg16.txt"));
  }
  EXPECT_EQ(PbsFromFileName("amoeba-6-pbs-8-complicated.txt"), 8);
  EXPECT_EQ(PbsFromFileName("vgg16.txt"), std::nullopt);
}

TEST(PipeDreamGraph, ParsesFieldsAndSumsActivationLists) {
  Profile p = ParsePipeDreamGraph(
      "node1 -- BatchNorm2d(64, eps=1e-05, momentum=0.1) -- forward_compute_time=0.61, "
      "backward_compute_time=1.5e-1, activation_size=[100; 23.5], parameter_size=7\n",
      "g.txt", 8);
  ASSERT_EQ(p.num_layers(), 1);
  EXPECT_EQ(p.layers[0].id, "node1");
  EXPECT_EQ(p.layers[0].name, "BatchNorm2d(64, eps=1e-05, momentum=0.1)");
  EXPECT_DOUBLE_EQ(p.layers[0].forward_ms, 0.61);
  EXPECT_DOUBLE_EQ(p.layers[0].backward_ms, 0.15);
  EXPECT_DOUBLE_EQ(p.layers[0].activation_bytes, 123.5);
  EXPECT_DOUBLE_EQ(p.layers[0].parameter_bytes, 7);
  EXPECT_EQ(p.batch_size, 8);
}

TEST(PipeDreamGraph, DescriptionWithSeparatorUsesLastOne) {
  Profile p = ParsePipeDreamGraph(
      "n1 -- a -- b -- forward_compute_time=1, backward_compute_time=2, activation_size=3, "
      "parameter_size=4\r\n",
      "g.txt", 1);
  EXPECT_EQ(p.layers[0].name, "a -- b");
  EXPECT_DOUBLE_EQ(p.layers[0].parameter_bytes, 4);
}

TEST(PipeDreamGraph, StableTopologicalOrderWithForwardReferences) {
  // File order c, a, b; edges a->c and a->b (declared before b exists): a first, then the
  // earliest ready node in the file, c, then b.
  std::string text = Node("c") + "\ta -- c\n" + Node("a") + "\ta -- b\n" + Node("b");
  Profile p = ParsePipeDreamGraph(text, "g.txt", 1);
  EXPECT_THAT(Ids(p), ::testing::ElementsAre("a", "c", "b"));
  // c has an incoming edge, so it is not chained; b neither. Edges as indices, from < to.
  EXPECT_THAT(p.edges, ::testing::ElementsAre(std::pair(0, 1), std::pair(0, 2)));
}

TEST(PipeDreamGraph, NodesWithoutInputsFollowThePreviousNode) {
  // No edges at all: a chain in file order (stored as the empty edge list).
  Profile chain = ParsePipeDreamGraph(Node("x") + Node("y") + Node("z"), "g.txt", 1);
  EXPECT_THAT(Ids(chain), ::testing::ElementsAre("x", "y", "z"));
  EXPECT_TRUE(chain.edges.empty());
  // y has no input: it follows x. w has no input too and follows y.
  Profile p = ParsePipeDreamGraph(
      Node("x") + Node("y") + Node("z") + Node("w") + "\tx -- z\n\ty -- z\n", "g.txt", 1);
  EXPECT_THAT(Ids(p), ::testing::ElementsAre("x", "y", "z", "w"));
  EXPECT_THAT(p.edges, ::testing::ElementsAre(std::pair(0, 1), std::pair(0, 2), std::pair(1, 2),
                                              std::pair(2, 3)));
}

TEST(PipeDreamGraph, ChainingSkippedWhenItWouldCloseACycle) {
  // The input node `in` comes last in the file and feeds a -> b. Chaining it after b would
  // close the cycle b -> in -> a -> b, so it stays a root and comes first.
  std::string text = Node("a") + Node("b") + Node("in") + "\tin -- a\n\ta -- b\n";
  Profile p = ParsePipeDreamGraph(text, "g.txt", 1);
  EXPECT_THAT(Ids(p), ::testing::ElementsAre("in", "a", "b"));
  EXPECT_TRUE(p.edges.empty());  // in -> a -> b is a chain
}

TEST(PipeDreamGraph, CutBytesOnBranchingGraph) {
  // a -> b, a -> c, b -> c, c -> d: the cut after b carries a's and b's outputs.
  std::string text = Node("a", 1, 100) + Node("b", 1, 10) + Node("c", 1, 1) + Node("d", 1, 7) +
                     "\ta -- b\n\ta -- c\n\tb -- c\n\tc -- d\n";
  Profile p = ParsePipeDreamGraph(text, "g.txt", 1);
  EXPECT_DOUBLE_EQ(p.CutBytes(0), 100);
  EXPECT_DOUBLE_EQ(p.CutBytes(1), 110);
  EXPECT_DOUBLE_EQ(p.CutBytes(2), 1);
  EXPECT_DOUBLE_EQ(p.CutBytes(3), 0);
}

TEST(PipeDreamGraph, CycleIsAnError) {
  std::string text = Node("a") + Node("b") + Node("c") + "\ta -- b\n\tb -- c\n\tc -- b\n";
  std::string err = GraphErrorOf(text, "cyc.txt");
  EXPECT_THAT(err, HasSubstr("cyc.txt"));
  EXPECT_THAT(err, HasSubstr("cycle"));
  EXPECT_THAT(err, ::testing::AnyOf(HasSubstr("'b'"), HasSubstr("'c'")));
  EXPECT_THAT(GraphErrorOf(Node("a") + "\ta -- a\n"), HasSubstr("cycle through node 'a'"));
}

TEST(PipeDreamGraph, BadLinesNameFileAndLine) {
  EXPECT_THAT(GraphErrorOf(Node("a") + "garbage\n", "bad.txt"), HasSubstr("bad.txt:2:"));
  EXPECT_THAT(GraphErrorOf(Node("a") + "\n" +
                           "b -- x -- forward_compute_time=abc, "
                           "backward_compute_time=1, activation_size=1, "
                           "parameter_size=1\n"),
              HasSubstr("g.txt:3: forward_compute_time: 'abc'"));
  EXPECT_THAT(GraphErrorOf("a -- x -- forward_compute_time=1, backward_compute_time=1, "
                           "activation_size=1\n"),
              HasSubstr("g.txt:1: parameter_size is missing"));
  EXPECT_THAT(GraphErrorOf("a -- x -- forward_compute_time=-1, backward_compute_time=1, "
                           "activation_size=1, parameter_size=1\n"),
              HasSubstr("g.txt:1:"));
  EXPECT_THAT(GraphErrorOf("a -- x -- forward_compute_time=1, backward_compute_time=1, "
                           "activation_size=[1; x], parameter_size=1\n"),
              HasSubstr("g.txt:1: activation_size"));
  EXPECT_THAT(GraphErrorOf(Node("a") + "\ta -- nowhere\n"), HasSubstr("g.txt:2:"));
  EXPECT_THAT(GraphErrorOf(Node("a") + "\ta -- b -- c\n"), HasSubstr("g.txt:2:"));
  EXPECT_THAT(GraphErrorOf(Node("a") + Node("a")), HasSubstr("g.txt:2: node 'a' is defined twice"));
  EXPECT_THAT(GraphErrorOf(""), HasSubstr("no nodes"));
}

TEST(PipeDreamGraph, WriterRoundTrips) {
  std::string text = Node("a", 1.25, 100) + Node("b", 0.5, 10) + Node("c", 3, 1) +
                     "\ta -- b\n\ta -- c\n\tb -- c\n";
  Profile p = ParsePipeDreamGraph(text, "g.txt", 4);
  p.layers[1].name = "weird -- name\nwith newline";
  Profile q = ParsePipeDreamGraph(PipeDreamGraphText(p), "g2.txt", 4);
  ASSERT_EQ(q.num_layers(), 3);
  EXPECT_EQ(q.edges, p.edges);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(q.layers[i].id, p.layers[i].id);
    EXPECT_DOUBLE_EQ(q.layers[i].forward_ms, p.layers[i].forward_ms);
    EXPECT_DOUBLE_EQ(q.layers[i].activation_bytes, p.layers[i].activation_bytes);
  }
  EXPECT_EQ(q.layers[1].name, "weird - name with newline");

  // A real single-root profile survives text -> Profile -> text -> Profile exactly.
  Profile resnet = LoadProfile(fs::path(DAPPLE_DATA_DIR) / "profiles/pipedream/resnet18.txt", 64);
  Profile again = ParsePipeDreamGraph(PipeDreamGraphText(resnet), "again.txt", 64);
  ASSERT_EQ(again.num_layers(), resnet.num_layers());
  for (int i = 0; i < resnet.num_layers(); ++i) EXPECT_EQ(again.layers[i].id, resnet.layers[i].id);
  EXPECT_EQ(again.edges, resnet.edges);
}

TEST(PipeDreamGraph, WriterIsStableAfterOneReadForSeveralRoots) {
  // gnmt has three inputs. Written in layer order, a second input follows the node before
  // it when read back (the text cannot say "a root"); after that the text is a fixed point.
  Profile gnmt = LoadProfile(fs::path(DAPPLE_DATA_DIR) / "profiles/pipedream/gnmt.txt", 64);
  Profile once = ParsePipeDreamGraph(PipeDreamGraphText(gnmt), "once.txt", 64);
  Profile twice = ParsePipeDreamGraph(PipeDreamGraphText(once), "twice.txt", 64);
  ASSERT_EQ(once.num_layers(), gnmt.num_layers());
  for (int i = 0; i < gnmt.num_layers(); ++i) EXPECT_EQ(once.layers[i].id, gnmt.layers[i].id);
  EXPECT_GE(once.edges.size(), gnmt.edges.size());
  EXPECT_EQ(twice.edges, once.edges);
}

}  // namespace
}  // namespace dapple
