// check_inputs and check_ops_current (see graph_checks.h).
#include "backend/graph_checks.h"

namespace kiln::backend_detail {

void check_inputs(const std::string& graph, const std::vector<TensorMeta>& parameters,
                  const std::vector<std::string>& names, const std::vector<Tensor>& inputs) {
  KILN_CHECK_VALUE(inputs.size() == parameters.size())
      << "graph \"" << graph << "\" takes " << parameters.size() << " inputs, got "
      << inputs.size();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorMeta& want = parameters[i];
    const std::string& name = names[i];
    KILN_CHECK_VALUE(inputs[i].defined()) << "input " << i << " (" << name << ") is undefined";
    KILN_CHECK_DTYPE(inputs[i].dtype() == want.dtype)
        << "input " << i << " (" << name << ") must be " << dtype_name(want.dtype) << ", got "
        << dtype_name(inputs[i].dtype());
    KILN_CHECK_SHAPE(inputs[i].shape() == want.shape)
        << "input " << i << " (" << name << ") must have shape " << shape_str(want.shape)
        << ", got " << shape_str(inputs[i].shape());
  }
}

void check_ops_current(const std::string& graph, uint64_t generation,
                       const std::vector<OpDefPtr>& ops) {
  if (OpRegistry::Instance().generation() == generation) return;
  for (const OpDefPtr& op : ops) {
    KILN_CHECK_VALUE(OpRegistry::Instance().find(op->name()) == op)
        << "op '" << op->name() << "' was unregistered or replaced after graph \"" << graph
        << "\" was built; build it again";
  }
}

}  // namespace kiln::backend_detail
