// Note [Rendezvous exposure]: while a `dapple train --nproc` job trains, no socket of its
// processes listens on an address other than the loopback. The sockets are read from
// /proc: each process's socket inodes (/proc/PID/fd) against the LISTEN entries of
// /proc/net/tcp and /proc/net/tcp6.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <set>
#include <thread>

#include "train_test_util.h"

namespace dapple::testing {
namespace {

struct Socket {
  std::string local;  // hex address:port as /proc/net/tcp{,6} writes it
  bool listening = false;
  bool loopback = false;
};

// Inodes of the sockets process `pid` holds.
std::set<std::string> SocketInodes(pid_t pid) {
  std::set<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    std::string target = fs::read_symlink(e.path(), ec).string();
    if (!ec && target.rfind("socket:[", 0) == 0) out.insert(target.substr(8, target.size() - 9));
  }
  return out;
}

// Loopback in /proc/net's hex: IPv4 127.x.y.z is "..7F" (little-endian); IPv6 ::1, or
// ::ffff:127.x.y.z mapped.
bool IsLoopbackHex(const std::string& addr) {
  if (addr.size() == 8) return addr.substr(6, 2) == "7F";
  if (addr == "00000000000000000000000001000000") return true;
  return addr.size() == 32 && addr.substr(0, 24) == "0000000000000000FFFF0000" &&
         addr.substr(30, 2) == "7F";
}

// The TCP sockets of `pids`, listening or not.
std::vector<Socket> TcpSockets(const std::vector<pid_t>& pids) {
  std::set<std::string> inodes;
  for (pid_t p : pids) inodes.merge(SocketInodes(p));
  std::vector<Socket> out;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::istringstream lines(Slurp(table));
    std::string line;
    std::getline(lines, line);  // header
    while (std::getline(lines, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, state, queues, timer, retr, uid, timeout, inode;
      f >> sl >> local >> remote >> state >> queues >> timer >> retr >> uid >> timeout >> inode;
      if (!inodes.count(inode)) continue;
      out.push_back({local, state == "0A", IsLoopbackHex(local.substr(0, local.find(':')))});
    }
  }
  return out;
}

std::vector<pid_t> ChildrenOf(pid_t parent) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string stat = Slurp(e.path() / "stat");
    auto close = stat.rfind(')');  // "pid (comm) state ppid ..."
    if (close == std::string::npos) continue;
    std::istringstream f(stat.substr(close + 2));
    std::string state;
    pid_t ppid = -1;
    f >> state >> ppid;
    if (ppid == parent) out.push_back(std::stoi(name));
  }
  return out;
}

// Variable `name` of process `pid`'s environment ("" when unset).
std::string EnvironmentVariable(pid_t pid, const std::string& name) {
  std::string env = Slurp("/proc/" + std::to_string(pid) + "/environ");
  std::istringstream f(env);
  for (std::string kv; std::getline(f, kv, '\0');)
    if (kv.rfind(name + "=", 0) == 0) return kv.substr(name.size() + 1);
  return "";
}

TEST(RendezvousExposure, TheDetectorSeesAListenerOnEveryInterface) {
  // The check below can fail: a socket listening on 0.0.0.0 is reported as exposed.
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  auto mine = TcpSockets({getpid()});
  close(fd);
  ASSERT_EQ(mine.size(), 1u);
  EXPECT_TRUE(mine[0].listening);
  EXPECT_FALSE(mine[0].loopback) << mine[0].local;
}

TEST(RendezvousExposure, ALocalJobListensOnTheLoopbackOnly) {
  fs::path dir = TestDir("exposure");
  fs::path plan = WritePlan(
      dir, "plan", PlanJson({{"fc0", "fc1", {0}}, {"fc2", "head", {1, 2}}}, 4, 4, "dapple-a"));
  std::string cmd = std::string("exec ") + DAPPLE_BINARY + " train " + kMlpFlags +
                    " --data synthetic --steps 200 --quiet --nproc 3 --plan " + plan.string() +
                    " >" + (dir / "out.txt").string() + " 2>" + (dir / "err.txt").string();
  pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // Sample the sockets of the launcher and its children until the job ends.
  int status = 0, samples = 0;
  size_t most_children = 0, sockets_seen = 0;
  std::vector<std::string> exposed;
  fs::path store_dir;
  fs::perms store_perms = fs::perms::unknown;
  while (waitpid(launcher, &status, WNOHANG) == 0) {
    std::vector<pid_t> pids = ChildrenOf(launcher);
    most_children = std::max(most_children, pids.size());
    if (store_dir.empty() && !pids.empty()) {
      std::string file = EnvironmentVariable(pids[0], "DAPPLE_RENDEZVOUS_FILE");
      if (!file.empty()) {
        store_dir = fs::path(file).parent_path();
        store_perms = fs::status(store_dir).permissions();
      }
    }
    pids.push_back(launcher);
    for (const Socket& so : TcpSockets(pids)) {
      ++sockets_seen;
      if (so.listening && !so.loopback) exposed.push_back(so.local);
    }
    ++samples;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << Slurp(dir / "err.txt");
  EXPECT_EQ(most_children, 3u);
  // The sampling saw the ranks' own sockets (gloo's connections, on the loopback). Gloo
  // stops listening once its connections are made; a TCPStore would listen all along.
  EXPECT_GT(sockets_seen, 0u) << samples << " samples";
  EXPECT_TRUE(exposed.empty()) << "listening beyond the loopback: " << exposed.front();
  // The ranks met in a FileStore in a folder only this user may enter, gone with the job.
  ASSERT_FALSE(store_dir.empty());
  EXPECT_EQ(store_perms, fs::perms::owner_all);
  EXPECT_FALSE(fs::exists(store_dir)) << store_dir;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace dapple::testing
