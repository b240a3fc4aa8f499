// Reading a PatternToPatternPass's source pattern and building instances of it as graphs (see
// kiln/pass.h, "Tools").
#include "pass/pattern_definition.h"

namespace kiln {

std::vector<Tensor> PatternToPatternPass::ExampleConstants(const std::string&) const { return {}; }

std::vector<SrcPatternElement> PatternToPatternPass::src_pattern() {
  Prepare();
  std::vector<SrcPatternElement> out;
  out.reserve(definition_->num_src);
  for (size_t i = 0; i < definition_->num_src; ++i) {
    const PatternDefinition::Element& e = definition_->elements[i];
    SrcPatternElement element;
    element.name = e.name;
    element.kind = e.kind == PatternDefinition::Kind::kVar      ? SrcPatternElement::Kind::kVar
                   : e.kind == PatternDefinition::Kind::kSeqVar ? SrcPatternElement::Kind::kSeqVar
                                                                : SrcPatternElement::Kind::kCNode;
    element.cond = e.cond;
    element.primitive = e.primitive;
    for (int in : e.inputs) element.inputs.push_back(static_cast<size_t>(in));
    out.push_back(std::move(element));
  }
  return out;
}

FuncGraphPtr instantiate_src_pattern(PatternToPatternPass& pass, const PatternVarFunc& make_var,
                                     const std::string& name) {
  KILN_CHECK_VALUE(make_var != nullptr) << "instantiate_src_pattern: make_var is empty";
  const std::vector<SrcPatternElement> elements = pass.src_pattern();
  auto graph = std::make_shared<FuncGraph>(name);
  const auto fail = [&](const SrcPatternElement& e, const NodePtr& node) {
    KILN_FAIL(kValue) << "instance of the source pattern of pass '" << pass.name()
                      << "': " << node->debug_string() << " fails the condition of '" << e.name
                      << "'";
  };
  std::vector<std::vector<NodePtr>> nodes(elements.size());  // one per var and CNode
  NodePtr root;
  std::vector<NodePtr> inputs;
  for (size_t i = 0; i < elements.size(); ++i) {
    const SrcPatternElement& e = elements[i];
    if (e.kind != SrcPatternElement::Kind::kCNode) {
      nodes[i] = make_var(*graph, e);
      KILN_CHECK_VALUE(e.kind == SrcPatternElement::Kind::kSeqVar || nodes[i].size() == 1)
          << "instantiate_src_pattern: make_var gave " << nodes[i].size() << " nodes for the var '"
          << e.name << "' of pass '" << pass.name() << "' (a var is one node)";
      for (const NodePtr& n : nodes[i]) {
        KILN_CHECK_VALUE(n != nullptr && n->graph() == graph.get())
            << "instantiate_src_pattern: make_var gave a node of another graph for '" << e.name
            << "' of pass '" << pass.name() << "'";
        if (e.cond && !e.cond(n)) fail(e, n);
      }
      continue;
    }
    inputs.clear();
    for (size_t in : e.inputs) inputs.insert(inputs.end(), nodes[in].begin(), nodes[in].end());
    // A fresh primitive per node: the pattern's may be shared with other instances.
    CNodePtr node = graph->add_cnode(
        std::make_shared<Primitive>(e.primitive->name(), e.primitive->attrs()), inputs);
    if (e.cond && !e.cond(node)) fail(e, node);
    nodes[i] = {node};
    root = node;
  }
  graph->set_output(root);
  return graph;
}

}  // namespace kiln
