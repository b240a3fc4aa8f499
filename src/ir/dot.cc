// Graphviz output: DOT text, and SVG by running Graphviz's `dot` on it.
#include "kiln/ir/dot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "ir/ir_access.h"
#include "ir/text_format.h"

extern char** environ;

namespace kiln::ir {

namespace {

// A DOT string literal's body: quotes and backslashes escaped, line breaks as \n (centred).
void append_dot_escaped(std::string& out, std::string_view s) {
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
}

void append_dot_id(std::string& out, const Node& n) {
  if (n.id() == Node::kReturnId) {
    out += "ret";
  } else {
    out += 'n';
    text::append_uint(out, n.id());
  }
}

constexpr size_t kMaxAttrText = 60;
constexpr int64_t kMaxShownElements = 8;

std::string label(const Node& n) {
  std::string s = "%";
  text::append_uint(s, n.id());
  s += ' ';
  if (n.is_parameter()) {
    s += static_cast<const Parameter&>(n).name();
  } else if (n.is_value()) {
    s += "const";
    const Tensor& v = static_cast<const ValueNode&>(n).value();
    if (v.defined() && v.numel() <= kMaxShownElements) {
      s += ' ';
      text::append_elements(s, v);
    }
  } else {
    const auto& c = static_cast<const CNode&>(n);
    s += c.primitive()->name();
    std::string attrs;
    for (const auto& [name, value] : c.primitive()->attrs().items()) {
      attrs += attrs.empty() ? "" : ", ";
      attrs += name + "=";
      text::append_attr_value(attrs, value);
    }
    if (attrs.size() > kMaxAttrText) attrs = attrs.substr(0, kMaxAttrText) + "...";
    if (!attrs.empty()) s += "\n{" + attrs + "}";
  }
  s += '\n';
  text::append_abstract(s, n.abstract());
  return s;
}

// Input positions are head labels, not edge labels: dot lays an edge label out as a node of its
// own, which made a 50-node graph with one widely used input take 17 s to render instead of 0.5.

// Highlighted nodes and the edges into them (see kiln/ir/dot.h).
constexpr const char* kHighlightNode =
    ", style=filled, fillcolor=\"#ffd54f\", color=\"#d32f2f\", penwidth=2.5";
constexpr const char* kHighlightEdge = "color=\"#d32f2f\", penwidth=2";

}  // namespace

std::string to_dot(const FuncGraph& graph, const NodeIdSet& highlight) {
  const std::vector<Node*> order = detail::topo_order(graph);
  std::string out = "digraph \"";
  append_dot_escaped(out, graph.name());
  out += "\" {\n  node [fontname=\"monospace\", fontsize=10];\n  edge [fontsize=9];\n";
  for (const Node* n : order) {
    out += "  ";
    append_dot_id(out, *n);
    const bool marked = !highlight.empty() && highlight.count(n->id()) != 0;
    if (n == graph.return_node().get()) {
      out += " [shape=doublecircle, label=\"return\"";
    } else {
      out += n->is_parameter() ? " [shape=ellipse, label=\""
                               : (n->is_value() ? " [shape=note, label=\"" : " [shape=box, label=\"");
      append_dot_escaped(out, label(*n));
      out += '"';
    }
    if (marked) out += kHighlightNode;
    out += "];\n";
  }
  for (const Node* n : order) {
    if (!n->is_cnode()) continue;
    const auto& c = static_cast<const CNode&>(*n);
    const bool marked = !highlight.empty() && highlight.count(c.id()) != 0;
    for (size_t i = 0; i < c.num_inputs(); ++i) {
      out += "  ";
      append_dot_id(out, *c.inputs()[i]);
      out += " -> ";
      append_dot_id(out, c);
      if (c.num_inputs() > 1 || marked) {
        out += " [";
        if (c.num_inputs() > 1) {
          out += "headlabel=\"";
          text::append_uint(out, i);
          out += marked ? "\", " : "\"";
        }
        if (marked) out += kHighlightEdge;
        out += ']';
      }
      out += ";\n";
    }
  }
  out += "}\n";
  return out;
}

namespace {

std::string find_on_path(const char* program) {
  const char* path = std::getenv("PATH");
  std::istringstream dirs(path != nullptr ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A temporary file that is removed when this goes out of scope.
struct TempFile {
  explicit TempFile(const char* suffix) {
    const char* dir = std::getenv("TMPDIR");
    path = std::string(dir != nullptr && *dir ? dir : "/tmp") + "/kiln-dot-XXXXXX" + suffix;
    const int fd = ::mkstemps(path.data(), static_cast<int>(std::strlen(suffix)));
    KILN_CHECK_VALUE(fd >= 0) << "cannot create a temporary file " << path << ": "
                              << std::strerror(errno);
    ::close(fd);
  }
  ~TempFile() { ::unlink(path.c_str()); }
  std::string path;
};

// Waits for the child `pid`; with a positive `timeout_seconds`, kills it (and returns false) when
// it runs longer.
bool wait_for(pid_t pid, int* status, double timeout_seconds) {
  if (timeout_seconds <= 0) {
    while (::waitpid(pid, status, 0) < 0 && errno == EINTR) {
    }
    return true;
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration<double>(timeout_seconds);
  auto pause = std::chrono::microseconds(200);
  for (;;) {
    const pid_t done = ::waitpid(pid, status, WNOHANG);
    if (done == pid || (done < 0 && errno != EINTR)) return true;
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  ::kill(pid, SIGKILL);
  while (::waitpid(pid, status, 0) < 0 && errno == EINTR) {
  }
  return false;
}

}  // namespace

bool graphviz_available() { return !find_on_path("dot").empty(); }

void write_svg(const FuncGraph& graph, const std::string& path, const NodeIdSet& highlight,
               double timeout_seconds) {
  const std::string dot = find_on_path("dot");
  KILN_CHECK_KIND(ErrorKind::kNotImplemented, !dot.empty())
      << "writing SVG needs Graphviz's 'dot' program on PATH (Debian package graphviz)";
  TempFile input(".dot");
  TempFile errors(".txt");
  {
    std::ofstream f(input.path);
    f << to_dot(graph, highlight);
    KILN_CHECK_VALUE(f.good()) << "cannot write " << input.path;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, errors.path.c_str(), O_WRONLY | O_TRUNC,
                                   0);
  std::string tsvg = "-Tsvg";
  std::string o = "-o";
  std::string out_path = path;
  std::string in_path = input.path;
  std::string program = dot;
  char* argv[] = {program.data(), tsvg.data(), o.data(), out_path.data(), in_path.data(), nullptr};
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, dot.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  KILN_CHECK_VALUE(spawned == 0) << "cannot run " << dot << ": " << std::strerror(spawned);
  int status = 0;
  const bool finished = wait_for(pid, &status, timeout_seconds);
  if (!finished) ::unlink(path.c_str());  // dot may have started writing it
  KILN_CHECK_VALUE(finished) << "dot did not finish writing " << path << " within "
                             << timeout_seconds << " s (a graph of " << graph.num_nodes()
                             << " nodes); it was stopped";
  KILN_CHECK_VALUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "dot failed to write " << path << ": " << read_file(errors.path);
}

}  // namespace kiln::ir
