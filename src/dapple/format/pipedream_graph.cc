// Reader and writer of PipeDream graph text (docs/design.md section 8):
//   nodeN -- description -- forward_compute_time=<ms>, backward_compute_time=<ms>,
//            activation_size=<bytes or [a; b; ...]>, parameter_size=<bytes>
//   <whitespace>nodeA -- nodeB                                  (an edge)
// Descriptions may contain ", " and "=" (e.g. "BatchNorm2d(64, eps=1e-05)"), so the
// key=value part is what follows the LAST " -- ". Edge lines may name nodes defined later.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <queue>

#include "dapple/common/error.h"
#include "dapple/common/json_util.h"
#include "dapple/format/json_text.h"
#include "dapple/format/profile.h"

namespace dapple {
namespace {

constexpr std::string_view kSep = " -- ";

std::string_view Trim(std::string_view s) {
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return s;
}

struct Node {
  LayerProfile layer;
  int line = 0;
};

struct EdgeRef {
  std::string from, to;
  int line = 0;
};

class GraphParser {
 public:
  explicit GraphParser(const std::string& source) : source_(source) {}

  [[noreturn]] void Fail(int line, std::string_view message) const {
    ThrowInput("{}:{}: {}", source_, line, message);
  }

  // One finite number >= 0.
  double ParseNumber(std::string_view s, int line, std::string_view key) const {
    s = Trim(s);
    double v = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || !std::isfinite(v) || v < 0)
      Fail(line, fmt::format("{}: '{}' is not a number >= 0", key, s));
    return v;
  }

  // A number, or a list "[a; b; ...]" whose sum is taken.
  double ParseSize(std::string_view s, int line, std::string_view key) const {
    s = Trim(s);
    if (s.empty() || s.front() != '[') return ParseNumber(s, line, key);
    if (s.back() != ']' || s.size() < 2) Fail(line, fmt::format("{}: unclosed list '{}'", key, s));
    s = s.substr(1, s.size() - 2);
    double sum = 0;
    while (true) {
      size_t semi = s.find(';');
      sum += ParseNumber(s.substr(0, semi), line, key);
      if (semi == std::string_view::npos) break;
      s.remove_prefix(semi + 1);
    }
    return sum;
  }

  Node ParseNode(std::string_view text, int line) const {
    size_t first = text.find(kSep);
    size_t last = text.rfind(kSep);
    if (first == std::string_view::npos || first == last)
      Fail(line,
           "expected 'nodeN -- description -- forward_compute_time=..., ...' or a "
           "tab-indented edge 'nodeA -- nodeB'");
    Node node;
    node.line = line;
    node.layer.id = std::string(Trim(text.substr(0, first)));
    if (node.layer.id.empty()) Fail(line, "the node has no id");
    size_t name_begin = first + kSep.size();
    node.layer.name =
        last > name_begin ? std::string(text.substr(name_begin, last - name_begin)) : std::string();
    std::string_view kv = text.substr(last + kSep.size());
    bool seen[4] = {false, false, false, false};
    static constexpr std::string_view kKeys[4] = {"forward_compute_time", "backward_compute_time",
                                                  "activation_size", "parameter_size"};
    while (!Trim(kv).empty()) {
      size_t comma = kv.find(',');
      std::string_view item = Trim(kv.substr(0, comma));
      kv = comma == std::string_view::npos ? std::string_view() : kv.substr(comma + 1);
      size_t eq = item.find('=');
      if (eq == std::string_view::npos)
        Fail(line, fmt::format("expected key=value, got '{}'", item));
      std::string_view key = Trim(item.substr(0, eq)), value = item.substr(eq + 1);
      int k = static_cast<int>(std::find(kKeys, kKeys + 4, key) - kKeys);
      if (k == 4) continue;  // an unknown key: ignored, for forward compatibility
      if (seen[k]) Fail(line, fmt::format("{} given twice", key));
      seen[k] = true;
      double v = k == 2 ? ParseSize(value, line, key) : ParseNumber(value, line, key);
      (k == 0   ? node.layer.forward_ms
       : k == 1 ? node.layer.backward_ms
       : k == 2 ? node.layer.activation_bytes
                : node.layer.parameter_bytes) = v;
    }
    for (int k = 0; k < 4; ++k)
      if (!seen[k]) Fail(line, fmt::format("{} is missing", kKeys[k]));
    return node;
  }

  EdgeRef ParseEdge(std::string_view text, int line) const {
    text = Trim(text);
    size_t sep = text.find(kSep);
    if (sep == std::string_view::npos || text.find(kSep, sep + 1) != std::string_view::npos)
      Fail(line, fmt::format("expected an edge 'nodeA -- nodeB', got '{}'", text));
    EdgeRef e{std::string(Trim(text.substr(0, sep))), std::string(Trim(text.substr(sep + 4))),
              line};
    if (e.from.empty() || e.to.empty()) Fail(line, "an edge needs two node ids");
    return e;
  }

 private:
  const std::string& source_;
};

// Whether `to` is reachable from `from` along `out` (iterative DFS; `stamp` marks visits).
bool Reaches(const std::vector<std::vector<int>>& out, int from, int to, std::vector<int>& mark,
             int stamp) {
  std::vector<int> stack = {from};
  mark[from] = stamp;
  while (!stack.empty()) {
    int v = stack.back();
    stack.pop_back();
    if (v == to) return true;
    for (int w : out[v])
      if (mark[w] != stamp) mark[w] = stamp, stack.push_back(w);
  }
  return false;
}

// Throws naming a cycle when the graph has one (every node left by Kahn's algorithm has a
// predecessor also left, so walking predecessors must come back to a node already seen).
void CheckAcyclic(const std::vector<Node>& nodes, const std::vector<std::vector<int>>& out,
                  const std::vector<std::vector<int>>& in, const std::string& source) {
  const int n = static_cast<int>(nodes.size());
  std::vector<int> indeg(n);
  for (int v = 0; v < n; ++v) indeg[v] = static_cast<int>(in[v].size());
  std::vector<int> ready;
  for (int v = 0; v < n; ++v)
    if (indeg[v] == 0) ready.push_back(v);
  int done = 0;
  while (!ready.empty()) {
    int v = ready.back();
    ready.pop_back();
    ++done;
    for (int w : out[v])
      if (--indeg[w] == 0) ready.push_back(w);
  }
  if (done == n) return;
  int v = 0;
  while (indeg[v] == 0) ++v;
  std::vector<int> seen_at(n, -1), walk;
  while (seen_at[v] < 0) {
    seen_at[v] = static_cast<int>(walk.size());
    walk.push_back(v);
    for (int u : in[v])
      if (indeg[u] > 0) {
        v = u;
        break;
      }
  }
  std::string cycle = nodes[v].layer.id;  // the walk went backwards: print it forwards
  for (int k = static_cast<int>(walk.size()) - 1; k >= seen_at[v]; --k)
    cycle += " -> " + nodes[walk[k]].layer.id;
  ThrowInput("{}:{}: the edges form a cycle through node '{}': {}", source, nodes[v].line,
             nodes[v].layer.id, cycle);
}

}  // namespace

std::optional<int> PbsFromFileName(const std::filesystem::path& path) {
  std::string name = path.filename().string();
  size_t at = name.find("-pbs-");
  if (at == std::string::npos) return std::nullopt;
  int v = 0;
  const char* begin = name.data() + at + 5;
  auto [ptr, ec] = std::from_chars(begin, name.data() + name.size(), v);
  if (ec != std::errc() || ptr == begin || v <= 0) return std::nullopt;
  return v;
}

Profile ParsePipeDreamGraph(const std::string& text, const std::string& source, int pbs) {
  if (pbs <= 0) ThrowInput("{}: the profile batch size must be positive (got {})", source, pbs);
  GraphParser parser(source);
  std::vector<Node> nodes;
  std::vector<EdgeRef> edge_refs;
  std::map<std::string, int> pos;
  size_t begin = 0;
  for (int line = 1; begin < text.size(); ++line) {
    size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    std::string_view l(text.data() + begin, end - begin);
    begin = end + 1;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (Trim(l).empty()) continue;
    if (l.front() == ' ' || l.front() == '\t') {
      edge_refs.push_back(parser.ParseEdge(l, line));
      continue;
    }
    Node node = parser.ParseNode(l, line);
    if (!pos.emplace(node.layer.id, static_cast<int>(nodes.size())).second)
      parser.Fail(line, fmt::format("node '{}' is defined twice", node.layer.id));
    nodes.push_back(std::move(node));
  }
  const int n = static_cast<int>(nodes.size());
  if (n == 0) ThrowInput("{}: no nodes (expected lines 'nodeN -- description -- ...')", source);

  std::vector<std::vector<int>> out(n), in(n);
  for (const EdgeRef& e : edge_refs) {
    auto a = pos.find(e.from), b = pos.find(e.to);
    if (a == pos.end() || b == pos.end())
      parser.Fail(e.line, fmt::format("the edge names node '{}', which no line defines",
                                      a == pos.end() ? e.from : e.to));
    if (std::find(out[a->second].begin(), out[a->second].end(), b->second) != out[a->second].end())
      continue;  // a repeated edge
    out[a->second].push_back(b->second);
    in[b->second].push_back(a->second);
  }
  CheckAcyclic(nodes, out, in, source);

  // A node without incoming edges, other than the first, follows the node before it in
  // the file, unless it already reaches that node (the edge would close a cycle).
  std::vector<int> mark(n, -1);
  for (int v = 1; v < n; ++v) {
    if (!in[v].empty() || Reaches(out, v, v - 1, mark, v)) continue;
    out[v - 1].push_back(v);
    in[v].push_back(v - 1);
  }

  // Stable topological order: among ready nodes, the one earliest in the file first.
  std::vector<int> indeg(n), index(n, -1);
  for (int v = 0; v < n; ++v) indeg[v] = static_cast<int>(in[v].size());
  std::priority_queue<int, std::vector<int>, std::greater<int>> ready;
  for (int v = 0; v < n; ++v)
    if (indeg[v] == 0) ready.push(v);
  Profile p;
  p.model = std::filesystem::path(source).stem().string();
  p.batch_size = pbs;
  p.metadata["source_format"] = "pipedream-graph";
  while (!ready.empty()) {
    int v = ready.top();
    ready.pop();
    index[v] = p.num_layers();
    p.layers.push_back(std::move(nodes[v].layer));
    for (int w : out[v])
      if (--indeg[w] == 0) ready.push(w);
  }
  DAPPLE_CHECK(p.num_layers() == n, "chaining closed a cycle");
  bool chain = true;
  for (int v = 0; v < n; ++v)
    for (int w : out[v]) p.edges.emplace_back(index[v], index[w]);
  std::sort(p.edges.begin(), p.edges.end());
  if (p.edges.size() == static_cast<size_t>(n - 1)) {
    for (int i = 0; i + 1 < n; ++i) chain = chain && p.edges[i] == std::make_pair(i, i + 1);
    if (chain) p.edges.clear();  // a plain chain: the empty form says so
  }
  ValidateProfile(p, source);
  return p;
}

Profile ReadPipeDreamGraph(const std::filesystem::path& path, std::optional<int> pbs) {
  if (!pbs) pbs = PbsFromFileName(path);
  if (!pbs)
    ThrowInput("{}: the profile batch size is unknown: pass --pbs N (or name the file *-pbs-N.txt)",
               path.string());
  return ParsePipeDreamGraph(format_internal::ReadTextFile(path.string()), path.string(), *pbs);
}

std::string PipeDreamGraphText(const Profile& p) {
  auto clean = [](std::string s) {
    for (char& c : s)
      if (c == '\n' || c == '\r') c = ' ';
    for (size_t at; (at = s.find(kSep)) != std::string::npos;) s.replace(at, kSep.size(), " - ");
    return s;
  };
  std::string text;
  for (const LayerProfile& l : p.layers) {
    if (l.id.empty() || l.id.find_first_of(" \t\r\n") != std::string::npos)
      ThrowInput("layer id '{}' cannot be written as PipeDream graph text (ids need no spaces)",
                 l.id);
    text += fmt::format(
        "{} -- {} -- forward_compute_time={}, backward_compute_time={}, activation_size={}, "
        "parameter_size={}\n",
        l.id, clean(l.name), l.forward_ms, l.backward_ms, l.activation_bytes, l.parameter_bytes);
  }
  auto edge = [&](int a, int b) {
    text += fmt::format("\t{} -- {}\n", p.layers.at(a).id, p.layers.at(b).id);
  };
  if (p.edges.empty())
    for (int i = 0; i + 1 < p.num_layers(); ++i) edge(i, i + 1);
  for (auto [a, b] : p.edges) edge(a, b);
  return text;
}

void WritePipeDreamGraph(const Profile& p, const std::filesystem::path& path) {
  WriteFileAtomic(path, PipeDreamGraphText(p));
}

}  // namespace dapple
