// LaunchWithRestarts and the progress file of Note [Restarts].
#include "dapple/runtime/launch/restarts.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "dapple/common/error.h"
#include "dapple/runtime/checkpoint/checkpoint.h"

namespace dapple {
namespace {

// A temporary file for the ranks' progress, removed when this object goes.
struct ProgressFile {
  std::string path;
  ProgressFile() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dapple-progress-XXXXXX").string();
    int fd = mkstemp(tmpl.data());
    if (fd < 0)
      throw Error(fmt::format("launcher: cannot create {}: {}", tmpl, std::strerror(errno)));
    close(fd);
    path = tmpl;
  }
  ~ProgressFile() { std::remove(path.c_str()); }
  ProgressFile(const ProgressFile&) = delete;
  ProgressFile& operator=(const ProgressFile&) = delete;

  void Clear() const { std::ofstream(path, std::ios::trunc); }
  std::optional<int64_t> Read() const {
    std::ifstream in(path);
    long long v = 0;
    if (in >> v) return v;
    return std::nullopt;
  }
};

std::optional<std::string> LatestName(const std::filesystem::path& dir) {
  auto p = LatestCheckpoint(dir);
  if (!p) return std::nullopt;
  return p->filename().string();
}

std::string HowItFailed(int code) {
  return code > 128 ? fmt::format("killed by signal {}", code - 128)
                    : fmt::format("exit code {}", code);
}

}  // namespace

std::vector<std::string> WithResumeAuto(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--resume") {
      if (i + 1 < argv.size() && argv[i + 1] == "auto") ++i;
      continue;
    }
    if (argv[i].rfind("--resume=", 0) == 0) continue;
    out.push_back(argv[i]);
  }
  out.push_back("--resume");
  out.push_back("auto");
  return out;
}

// Note [Progress without a file system round trip]: rank 0 reports after every step, on the
// critical path of the last stage when it holds it. Opening, truncating and closing the file
// each step took 0.45 ms (median; 3 ms at the 90th percentile) on this machine's /tmp,
// a fifth of the quickstart's step. So the file stays open and each report overwrites the
// same 21 bytes (the count right-aligned in 20 characters, then a newline) with one pwrite
// into the page cache; the launcher reads it with `>>`, which skips the leading blanks.
void ReportCompletedSteps(int64_t completed) {
  static const int fd = [] {
    const char* path = std::getenv("DAPPLE_PROGRESS_FILE");
    if (path == nullptr || *path == '\0') return -1;
    return open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  }();
  if (fd < 0) return;  // progress is only for the restart line; never fail a step for it
  char text[32];
  const int n = std::snprintf(text, sizeof(text), "%20lld\n", static_cast<long long>(completed));
  ssize_t ignored = pwrite(fd, text, static_cast<size_t>(n), 0);
  (void)ignored;
}

int RestartAttempt() {
  const char* v = std::getenv("DAPPLE_RESTART");
  return v == nullptr ? 0 : std::atoi(v);
}

int LaunchWithRestarts(LaunchOptions o, const RestartPolicy& p) {
  DAPPLE_CHECK(p.max_restarts == 0 || !p.checkpoint_dir.empty());
  ProgressFile progress;
  const std::optional<std::string> latest_at_start =
      p.checkpoint_dir.empty() ? std::nullopt : LatestName(p.checkpoint_dir);
  int world = p.world_size;
  int failed_before = -1;  // the rank that failed in the previous attempt
  for (int attempt = 0;; ++attempt) {
    progress.Clear();
    // Only a restart's line reads it (below): no per-step report without restarts.
    if (p.max_restarts > 0) o.extra_env["DAPPLE_PROGRESS_FILE"] = progress.path;
    o.extra_env["DAPPLE_RESTART"] = std::to_string(attempt);
    int failed_rank = -1;
    double stop_s = 0;
    const int code = LaunchLocal(o, &failed_rank, &stop_s);
    if (code == 0) return 0;
    const std::string how = HowItFailed(code);
    std::fprintf(stderr,
                 "dapple train: rank %d of %d failed (%s); the job was stopped (%.1f s after the "
                 "failure)\n",
                 failed_rank, world, how.c_str(), stop_s);
    if (p.max_restarts == 0) return code;
    if (attempt >= p.max_restarts) {
      std::fprintf(
          stderr, "dapple train: not restarted: the %d restart%s of --max-restarts %s spent\n",
          p.max_restarts, p.max_restarts == 1 ? "" : "s", p.max_restarts == 1 ? "is" : "are");
      return code;
    }
    if (code == 2) {
      std::fprintf(stderr,
                   "dapple train: not restarted: exit code 2 is bad input, which a restart "
                   "repeats\n");
      return code;
    }
    if (LaunchWasInterrupted()) {
      std::fprintf(stderr, "dapple train: not restarted: the job was interrupted\n");
      return code;
    }
    // Resume when this run committed a checkpoint (or the user asked to resume anyway).
    const std::optional<std::string> latest = LatestName(p.checkpoint_dir);
    const bool resume = p.user_resumes || (latest && latest != latest_at_start);
    int64_t from = 0;
    if (resume && latest) {
      try {
        from = ReadCheckpointMeta(p.checkpoint_dir / *latest).step;
      } catch (const std::exception&) {
        from = -1;  // the ranks' resume names what is wrong with it
      }
    }
    const int64_t replayed =
        std::max<int64_t>(0, progress.Read().value_or(0) - std::max<int64_t>(from, 0));
    const std::string whence =
        from < 0 ? fmt::format("resuming from {}", (p.checkpoint_dir / *latest).string())
        : resume ? fmt::format("resuming from step {}", from)
                 : std::string("starting again from step 0 (no checkpoint of this run yet)");
    std::fprintf(stderr,
                 "dapple train: restart %d of %d after rank %d failed (%s): %s, %lld completed "
                 "step%s replayed\n",
                 attempt + 1, p.max_restarts, failed_rank, how.c_str(), whence.c_str(),
                 static_cast<long long>(replayed), replayed == 1 ? "" : "s");
    if (resume) o.argv = WithResumeAuto(o.argv);
    if (p.replan && failed_rank >= 0 && failed_rank == failed_before) {
      std::fprintf(stderr,
                   "dapple train: rank %d failed twice in a row: its device counts as lost\n",
                   failed_rank);
      if (!p.replan(failed_rank, o)) return code;
      world = o.nproc_per_node * o.nnodes;
      failed_before = -1;  // the ranks are numbered anew
    } else {
      failed_before = failed_rank;
    }
  }
}

}  // namespace dapple
