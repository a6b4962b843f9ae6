// scripts/netns.sh: `up` makes two namespaces joined by a shaped veth pair, `down` removes
// them and nothing else, a failing `up` removes what it made. Skips where namespaces are not
// permitted (the script exits 4 and says why).
#include <gtest/gtest.h>

#include "dist/netns_test_util.h"

namespace dapple::testing {
namespace {

class NetnsScriptTest : public ::testing::Test {
 protected:
  void TearDown() override {
    RunCommand(net_.Script("down"));
    std::filesystem::remove_all(net_.state_dir);
  }
  // Brings the network up, or skips the test with the script's message.
  bool UpOrSkip(const std::string& extra = "") {
    up_ = RunCommand(fmt::format("{}{} {} {} up", net_.Env(), extra, NetnsScript(), net_.Args()));
    return up_.rc != 4;
  }
  TestNet net_{1};
  CommandResult up_;
};

TEST_F(NetnsScriptTest, UpMakesTwoShapedNamespacesAndDownRemovesThem) {
  std::string host_links_before = RunCommand("ip -o link show | cut -d: -f2").output;
  if (!UpOrSkip("DAPPLE_NETNS_RATE=100mbit")) GTEST_SKIP() << up_.output;
  ASSERT_EQ(up_.rc, 0) << up_.output;
  for (int s = 0; s < 2; ++s) {
    EXPECT_TRUE(NamespaceExists(net_.Ns(s))) << net_.Ns(s);
    std::string veth = fmt::format("{}-v{}", net_.prefix, s);
    CommandResult addr = RunCommand(fmt::format("ip -n {} -brief addr show", net_.Ns(s)));
    EXPECT_NE(addr.output.find(net_.Addr(s) + "/30"), std::string::npos) << addr.output;
    EXPECT_NE(addr.output.find(veth), std::string::npos) << addr.output;
    EXPECT_NE(addr.output.find("127.0.0.1/8"), std::string::npos) << "loopback is up";
    CommandResult q =
        RunCommand(fmt::format("ip netns exec {} tc qdisc show dev {}", net_.Ns(s), veth));
    EXPECT_NE(q.output.find("tbf"), std::string::npos) << q.output;
    EXPECT_NE(q.output.find("100Mbit"), std::string::npos) << q.output;
    // Nothing beyond the /30 is reachable: the only routes are the link's own.
    CommandResult routes = RunCommand(fmt::format("ip -n {} route show", net_.Ns(s)));
    EXPECT_EQ(routes.output.find("default"), std::string::npos) << routes.output;
  }
  EXPECT_EQ(RunCommand(net_.Script("addr s1")).output, net_.Addr(1) + "\n");
  EXPECT_EQ(RunCommand(net_.Script("status")).rc, 0);
  EXPECT_EQ(RunCommand(net_.Script("exec s0 true")).rc, 0);
  // The host's own interfaces are untouched: both veth ends live in the namespaces.
  EXPECT_EQ(RunCommand("ip -o link show | cut -d: -f2").output, host_links_before);
  // A second `up` refuses and leaves the first one alone.
  CommandResult again = RunCommand(net_.Script("up"));
  EXPECT_EQ(again.rc, 1);
  EXPECT_NE(again.output.find("already up"), std::string::npos) << again.output;
  EXPECT_TRUE(NamespaceExists(net_.Ns(0)));

  CommandResult down = RunCommand(net_.Script("down"));
  ASSERT_EQ(down.rc, 0) << down.output;
  EXPECT_FALSE(NamespaceExists(net_.Ns(0)));
  EXPECT_FALSE(NamespaceExists(net_.Ns(1)));
  EXPECT_FALSE(std::filesystem::exists(net_.state_dir + "/" + net_.prefix));
  EXPECT_EQ(RunCommand(net_.Script("status")).rc, 3);
  EXPECT_EQ(RunCommand(net_.Script("down")).rc, 0) << "down is idempotent";
  EXPECT_EQ(RunCommand("ip -o link show | cut -d: -f2").output, host_links_before);
}

TEST_F(NetnsScriptTest, FailingUpRemovesWhatItMade) {
  if (!UpOrSkip("DAPPLE_NETNS_FAIL_AFTER_UP=1")) GTEST_SKIP() << up_.output;
  EXPECT_EQ(up_.rc, 1) << up_.output;
  EXPECT_NE(up_.output.find("removing what it made"), std::string::npos) << up_.output;
  EXPECT_FALSE(NamespaceExists(net_.Ns(0)));
  EXPECT_FALSE(NamespaceExists(net_.Ns(1)));
  EXPECT_FALSE(std::filesystem::exists(net_.state_dir + "/" + net_.prefix));
}

TEST_F(NetnsScriptTest, BadRateFailsAndRemovesWhatItMade) {
  if (!UpOrSkip("DAPPLE_NETNS_RATE=fast")) GTEST_SKIP() << up_.output;
  EXPECT_EQ(up_.rc, 2) << up_.output;
  EXPECT_NE(up_.output.find("--rate fast"), std::string::npos) << up_.output;
  EXPECT_FALSE(NamespaceExists(net_.Ns(0)));
  EXPECT_FALSE(NamespaceExists(net_.Ns(1)));
}

TEST_F(NetnsScriptTest, DownLeavesNamespacesItDidNotMake) {
  // A namespace of the same name made by someone else: `up` refuses, `down` keeps it.
  CommandResult made = RunCommand("ip netns add " + net_.Ns(0));
  if (made.rc != 0) GTEST_SKIP() << "network namespaces not permitted here: " << made.output;
  CommandResult up = RunCommand(net_.Script("up"));
  EXPECT_EQ(up.rc, 1) << up.output;
  EXPECT_NE(up.output.find("was not made by this script"), std::string::npos) << up.output;
  EXPECT_EQ(RunCommand(net_.Script("down")).rc, 0);
  EXPECT_TRUE(NamespaceExists(net_.Ns(0)));
  EXPECT_FALSE(NamespaceExists(net_.Ns(1)));
  RunCommand("ip netns del " + net_.Ns(0));
}

TEST(NetnsScriptUsageTest, RejectsBadPrefixAndUnknownCommand) {
  CommandResult r = RunCommand(fmt::format("{} --prefix 'bad name' up", NetnsScript()));
  EXPECT_EQ(r.rc, 2) << r.output;
  r = RunCommand(fmt::format("{} frobnicate", NetnsScript()));
  EXPECT_EQ(r.rc, 2) << r.output;
}

}  // namespace
}  // namespace dapple::testing
