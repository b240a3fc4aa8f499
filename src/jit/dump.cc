// IR dumps of the jit pipeline (see dump.h).
#include "jit/dump.h"

#include <sys/stat.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace kiln::jit_detail {

namespace {

std::atomic<int> g_compilations{0};

// Graph names come from Python qualified names ("Net.forward.<locals>.f"): keep them readable
// in file names without path separators or shell-hostile characters.
std::string file_safe(const std::string& name) {
  std::string out;
  for (const char c : name) {
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

}  // namespace

std::string dump_dir(const std::string& option) {
  if (!option.empty()) return option;
  const char* env = std::getenv("KILN_DUMP_IR");
  return env != nullptr ? env : "";
}

IrDump::IrDump(std::string dir, const std::string& graph_name) : dir_(std::move(dir)) {
  if (dir_.empty()) return;
  make_dirs(dir_);
  char number[16];
  std::snprintf(number, sizeof(number), "%04d", ++g_compilations);
  prefix_ = dir_ + "/" + file_safe(graph_name) + "." + number + ".";
}

void IrDump::write(const std::string& step, const FuncGraph& graph) {
  if (dir_.empty()) return;
  char number[8];
  std::snprintf(number, sizeof(number), "%02d_", step_++);
  const std::string base = prefix_ + number + file_safe(step);
  write_file(base + ".kir", ir::print(graph));
  write_file(base + ".dot", ir::to_dot(graph));
  static const bool has_dot = ir::graphviz_available();
  if (has_dot) ir::write_svg(graph, base + ".svg");
}

void IrDump::before(const Pass&, PassStage, const FuncGraph&) {}

void IrDump::after(const PassRunRecord& record, const FuncGraph& graph) {
  if (record.changed) write(std::string(stage_name(record.stage)) + "." + record.pass, graph);
}

}  // namespace kiln::jit_detail
