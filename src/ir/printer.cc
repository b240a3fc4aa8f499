// ir::print: the text format of kiln/ir/text.h, written straight into one string.
#include "ir/ir_access.h"
#include "ir/text_format.h"
#include "kiln/ir/text.h"

namespace kiln::ir {

namespace {

void append_name(std::string& out, std::string_view name) {
  if (text::is_plain_name(name)) {
    out += name;
  } else {
    text::append_quoted(out, name);
  }
}

void append_ref(std::string& out, const Node& n) {
  out += '%';
  text::append_uint(out, n.id());
}

void append_cnode(std::string& out, const CNode& c) {
  append_name(out, c.primitive()->name());
  out += '(';
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (i) out += ", ";
    append_ref(out, *c.inputs()[i]);
  }
  out += ')';
  const auto& attrs = c.primitive()->attrs().items();
  if (!attrs.empty()) {
    out += " {";
    for (size_t i = 0; i < attrs.size(); ++i) {
      out += i ? ", " : "";
      append_name(out, attrs[i].first);
      out += " = ";
      text::append_attr_value(out, attrs[i].second);
    }
    out += '}';
  }
  out += " : ";
  text::append_abstract(out, c.abstract());
}

void append_value(std::string& out, const ValueNode& v) {
  out += "const ";
  if (!v.value().defined()) {
    out += "None";
    return;
  }
  text::append_meta(out, TensorMeta::of(v.value()));
  out += ' ';
  text::append_elements(out, v.value());
}

}  // namespace

std::string print(const FuncGraph& graph) {
  const std::vector<Node*> order = detail::topo_order(graph);
  std::string out;
  out.reserve(48 * order.size() + 64);
  out += "graph ";
  text::append_quoted(out, graph.name());
  out += '(';
  for (size_t i = 0; i < graph.parameters().size(); ++i) {
    const Parameter& p = *graph.parameters()[i];
    out += i ? ", " : "";
    append_ref(out, p);
    if (!p.name().empty()) {
      out += ' ';
      text::append_quoted(out, p.name());
    }
    out += ": ";
    text::append_abstract(out, p.abstract());
  }
  out += ") {\n";
  for (const Node* n : order) {
    if (n->is_parameter() || n == graph.return_node().get()) continue;
    out += "  ";
    append_ref(out, *n);
    out += " = ";
    if (n->is_value()) {
      append_value(out, static_cast<const ValueNode&>(*n));
    } else {
      append_cnode(out, static_cast<const CNode&>(*n));
    }
    out += '\n';
  }
  out += "  return";
  for (size_t i = 0; i < graph.outputs().size(); ++i) {
    out += i ? ", " : " ";
    append_ref(out, *graph.outputs()[i]);
  }
  out += "\n}\n";
  return out;
}

}  // namespace kiln::ir
