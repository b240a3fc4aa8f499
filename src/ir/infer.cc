#include "ir/infer.h"

namespace kiln::ir {

// Note [Inference without allocation]
// Building a graph infers every node, so a node's inference must cost little: the inputs'
// metadata goes into a MetaList that the graph keeps (FuncGraph::scratch_) and that keeps its
// capacity, and a TensorMeta's shape is a SmallVector with six dims inline, so filling it
// allocates nothing; the op is found through the Primitive's cache (no registry lock per node),
// which also keeps the normalized attributes (none to make for an op without attributes). The
// op's own result list is a MetaList too, inline up to two outputs (a tuple's elements are then
// moved into the Abstract's own vector). A node's inputs live inline in the node (InputList) and
// callers pass them as a NodeSpan, so the node itself is the only allocation for most nodes.

namespace {

Abstract infer_tuple_get_item(const Primitive& primitive, NodeSpan inputs) {
  KILN_CHECK_TYPE(inputs.size() == 1) << "TupleGetItem: expected 1 input, got " << inputs.size();
  KILN_CHECK_TYPE(primitive.attrs().items().size() == 1 && primitive.attrs().has("index"))
      << "TupleGetItem: expected exactly the attribute 'index'";
  const int64_t index = primitive.attrs().get<int64_t>("index");
  const Abstract& tuple = inputs[0]->abstract();
  KILN_CHECK_TYPE(tuple.is_tuple()) << "TupleGetItem: input " << inputs[0]->debug_string() << " is "
                                    << tuple.str() << ", not a tuple";
  const auto size = static_cast<int64_t>(tuple.elements().size());
  KILN_CHECK_INDEX(index >= 0 && index < size)
      << "TupleGetItem: index " << index << " is out of range for " << tuple.str();
  return Abstract(tuple.elements()[static_cast<size_t>(index)]);
}

}  // namespace

Abstract infer_abstract(const Primitive& primitive, NodeSpan inputs, MetaList& metas) {
  if (primitive.is_tuple_get_item()) return infer_tuple_get_item(primitive, inputs);
  KILN_CHECK_VALUE(!primitive.is_return())
      << "'Return' is the graph's return node, not an op; use FuncGraph::set_outputs";
  const OpDef& op = primitive.op();
  // See Note [Inference without allocation].
  metas.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Node& in = *inputs[i];
    TensorMeta& meta = metas[i];
    if (in.is_value() && !static_cast<const ValueNode&>(in).value().defined()) {
      meta = TensorMeta();
      meta.defined = false;
      continue;
    }
    KILN_CHECK_TYPE(in.abstract().is_tensor())
        << op.name() << ": input " << i << " (" << in.debug_string() << ") is "
        << in.abstract().str() << ", not a tensor";
    meta = in.abstract().tensor();
  }
  MetaList out = op.infer_outputs(metas, primitive.normalized_attrs());
  if (op.num_outputs() == 1) return Abstract(std::move(out[0]));
  return Abstract::tuple(std::move(out));
}

}  // namespace kiln::ir
