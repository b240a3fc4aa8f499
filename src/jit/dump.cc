// IR dumps of the jit pipeline (see dump.h).
#include "jit/dump.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <unordered_map>

namespace kiln::jit_detail {

namespace {

std::atomic<int> g_compilations{0};
std::atomic<int> g_temp_files{0};

// The page shows at most this much of a graph's text; the .kir file has all of it.
constexpr size_t kMaxPageText = 256 * 1024;

// Graph names come from Python qualified names ("Net.forward.<locals>.f"): keep them readable
// in file names without path separators or shell-hostile characters, and short enough that a
// graph name and a step name (a pass's) with the numbers and suffixes stay below the 255 bytes
// a file name may have. The numbers keep shortened names apart.
std::string file_safe(const std::string& name) {
  constexpr size_t kMaxLength = 100;
  std::string out;
  for (const char c : name.substr(0, kMaxLength)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '_' || c == '-' || c == '.';
    out += ok ? c : '_';
  }
  return out.empty() ? "graph" : out;
}

// mkdir -p.
void make_dirs(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    const std::string part = dir.substr(0, pos);
    if (::mkdir(part.c_str(), 0777) != 0 && errno != EEXIST) {
      KILN_FAIL(kValue) << "cannot create the IR dump folder " << part << ": "
                        << std::strerror(errno);
    }
  }
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
  f.close();
  KILN_CHECK_VALUE(f.good()) << "cannot write the IR dump " << path;
}

// Pages are read while compilations (of other threads or processes) rewrite them: write a
// temporary file and rename it, so a reader sees the old page or the new one, never half.
void replace_file(const std::string& path, const std::string& text) {
  const std::string temp = path + ".tmp" + std::to_string(::getpid()) + "_" +
                           std::to_string(++g_temp_files);
  write_file(temp, text);
  if (std::rename(temp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(temp.c_str());
    KILN_FAIL(kValue) << "cannot write the IR dump " << path << ": " << std::strerror(error);
  }
}

std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }

// What identifies a node's computation, apart from its id.
bool same_node(const Node& a, const Node& b) {
  if (a.kind() != b.kind() || a.abstract() != b.abstract()) return false;
  if (!a.is_cnode()) return true;  // parameters and constants never change in place
  const auto& ca = static_cast<const CNode&>(a);
  const auto& cb = static_cast<const CNode&>(b);
  if (!(*ca.primitive() == *cb.primitive()) || ca.num_inputs() != cb.num_inputs()) {
    return false;
  }
  for (size_t i = 0; i < ca.num_inputs(); ++i) {
    if (ca.input(i)->id() != cb.input(i)->id()) return false;
  }
  return true;
}

}  // namespace

std::string dump_dir(const std::string& option) {
  if (!option.empty()) return option;
  const char* env = std::getenv("KILN_DUMP_IR");
  return env != nullptr ? env : "";
}

ir::NodeIdSet changed_nodes(const FuncGraph& before, const FuncGraph& after) {
  std::unordered_map<uint64_t, const Node*> old_nodes;
  const std::vector<NodePtr> old_list = before.nodes();
  old_nodes.reserve(old_list.size());
  for (const NodePtr& n : old_list) old_nodes.emplace(n->id(), n.get());
  ir::NodeIdSet changed;
  for (const NodePtr& n : after.nodes()) {
    const auto it = old_nodes.find(n->id());
    if (it == old_nodes.end()) {
      changed.insert(n->id());  // added
      continue;
    }
    if (!same_node(*it->second, *n)) changed.insert(n->id());
    old_nodes.erase(it);
  }
  for (const auto& [id, node] : old_nodes) changed.insert(id);  // removed
  return changed;
}

IrDump::IrDump(std::string dir, const std::string& graph_name) : dir_(std::move(dir)) {
  if (dir_.empty()) return;
  make_dirs(dir_);
  graph_name_ = graph_name;
  char number[16];
  std::snprintf(number, sizeof(number), "%04d", ++g_compilations);
  stem_ = file_safe(graph_name) + "." + number;
  prefix_ = dir_ + "/" + stem_ + ".";
}

IrDump::~IrDump() = default;

std::string IrDump::next_step_base(const std::string& step) {
  char number[16];
  std::snprintf(number, sizeof(number), "%02d_", step_++);
  return number + file_safe(step);
}

DumpGraphFiles IrDump::write_graph(const std::string& base, const FuncGraph& graph,
                                   std::string text, const ir::NodeIdSet& highlight) {
  DumpGraphFiles files;
  const std::string path = prefix_ + base;
  write_file(path + ".kir", text);
  write_file(path + ".dot", ir::to_dot(graph, highlight));
  files.kir = base_name(path + ".kir");
  files.dot = base_name(path + ".dot");
  static const bool has_dot = ir::graphviz_available();
  if (!has_dot) {
    files.svg_note = "no SVG: Graphviz's dot is not installed (Debian package graphviz)";
  } else if (graph.num_nodes() >= svg_node_limit_) {
    files.svg_note = "no SVG: dot ran out of time on a graph of " +
                     std::to_string(svg_node_limit_) + " nodes earlier in this compilation";
  } else {
    // A dump never fails a compilation for want of a picture: the page says why it has none.
    const auto start = std::chrono::steady_clock::now();
    try {
      ir::write_svg(graph, path + ".svg", highlight, kSvgSeconds);
      files.svg = base_name(path + ".svg");
    } catch (const Error& e) {
      files.svg_note = "no SVG: " + e.message();
      const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
      if (took.count() >= kSvgSeconds) svg_node_limit_ = graph.num_nodes();
    }
  }
  if (text.size() > kMaxPageText) {
    text.resize(text.rfind('\n', kMaxPageText) + 1);
    files.text_cut = true;
  }
  files.text = std::move(text);
  return files;
}

void IrDump::write(const std::string& step, const FuncGraph& graph) {
  if (dir_.empty()) return;
  DumpStep s;
  s.title = step;
  s.has_graphs = true;
  s.after = write_graph(next_step_base(step), graph, ir::print(graph), {});
  steps_.push_back(std::move(s));
  write_page();
}

void IrDump::before(const Pass&, PassStage, const FuncGraph& graph) {
  if (dir_.empty()) return;
  before_text_ = ir::print(graph);
}

void IrDump::after(const PassRunRecord& record, const FuncGraph& graph) {
  if (dir_.empty()) return;
  DumpStep s;
  s.is_pass = true;
  s.stage = stage_name(record.stage);
  s.pass = record.pass;
  s.title = s.stage + "." + s.pass;
  s.changed = record.changed;
  s.matches = record.matches;
  s.refusals = record.refusals;
  s.reasons = record.reasons;
  s.seconds = record.seconds;
  std::string after_text = ir::print(graph);
  const bool text_changed = after_text != before_text_;
  if (record.changed || text_changed) {
    if (!record.changed) {
      s.note = "the pass reported no change, but the graph's text changed";
    } else if (!text_changed) {
      s.note = "the pass reported a change, but the graph's text is the same";
    }
    // Node ids survive print and parse, so the parsed text is the graph as it was.
    const FuncGraphPtr before = ir::parse(before_text_);
    s.highlight = changed_nodes(*before, graph);
    const std::string base = next_step_base(s.title);
    s.has_graphs = true;
    s.before = write_graph(base + ".before", *before, std::move(before_text_), s.highlight);
    s.after = write_graph(base + ".after", graph, std::move(after_text), s.highlight);
  }
  before_text_.clear();
  steps_.push_back(std::move(s));
  write_page();
}

void IrDump::write_page() {
  replace_file(prefix_ + "html", compilation_page(stem_, graph_name_, steps_));
  // The index lists the pages in the folder, this one included from its first step on.
  if (steps_.size() == 1) replace_file(dir_ + "/index.html", index_page(list_pages(dir_)));
}

}  // namespace kiln::jit_detail
