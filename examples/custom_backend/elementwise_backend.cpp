// elementwise_backend.cpp — a young backend that runs only elementwise ops. Supports() declines
// every other node, so the jit splits each graph: the parts of elementwise ops come here, the
// rest (matmul, softmax, reductions, ...) runs on kiln_cpu, and the results are the same.
//
// It also shows how a backend reads the IR: Build walks the graph in topological order and keeps
// a list of steps (one op call each, over numbered values); Run fills the values. Each op runs
// through kiln::call_op, that is through the op's own kernel — a real backend would generate or
// pick kernels here.
#include <kiln/backend.h>
#include <kiln/op.h>

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace {

struct Step {
  std::string op;
  kiln::Attrs attrs;
  std::vector<size_t> inputs;  // value numbers
  size_t output;
};

struct Program {
  std::string name;
  size_t num_values = 0;
  std::vector<std::pair<size_t, kiln::Tensor>> constants;
  std::vector<Step> steps;
  std::vector<size_t> outputs;
};

class ElementwiseBackend : public kiln::BackendBase {
 public:
  bool Supports(const kiln::CNodePtr& node) const override {
    const kiln::OpDefPtr op = node->primitive()->op_def();
    return op != nullptr && op->has_trait(kiln::kTraitElementwise);
  }

  kiln::BackendGraphId Build(const kiln::FuncGraphPtr& g, const kiln::BackendJitConfig&) override {
    Program p;
    p.name = g->name();
    std::unordered_map<const kiln::Node*, size_t> value;
    for (const kiln::ParameterPtr& param : g->parameters()) value[param.get()] = p.num_values++;
    std::string ops;
    for (const kiln::NodePtr& n : g->topological_order()) {
      if (n == g->return_node() || n->is_parameter()) continue;
      if (n->is_value()) {
        value[n.get()] = p.num_values;
        p.constants.emplace_back(p.num_values++, static_cast<const kiln::ValueNode&>(*n).value());
        continue;
      }
      const auto& c = static_cast<const kiln::CNode&>(*n);
      Step step{c.primitive()->name(), c.primitive()->attrs(), {}, p.num_values++};
      for (const kiln::NodePtr& in : c.inputs()) step.inputs.push_back(value.at(in.get()));
      value[n.get()] = step.output;
      ops += (ops.empty() ? "" : " ") + step.op;
      p.steps.push_back(std::move(step));
    }
    for (const kiln::NodePtr& out : g->outputs()) p.outputs.push_back(value.at(out.get()));
    std::printf("[elementwise_backend] Build graph \"%s\": %s\n", p.name.c_str(), ops.c_str());
    std::fflush(stdout);  // in order with the Python program's own output
    std::lock_guard<std::mutex> lock(mutex_);
    programs_[next_id_] = std::make_shared<const Program>(std::move(p));
    return next_id_++;
  }

  kiln::RunningStatus Run(kiln::BackendGraphId id, const std::vector<kiln::Tensor>& in,
                          std::vector<kiln::Tensor>* out) override {
    std::shared_ptr<const Program> p;  // kept while running, even if cleared meanwhile
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = programs_.find(id);
      if (it == programs_.end()) return kiln::RunningStatus::kRunningFailure;
      p = it->second;
    }
    std::printf("[elementwise_backend] Run graph \"%s\"\n", p->name.c_str());
    std::fflush(stdout);
    std::vector<kiln::Tensor> values(p->num_values);
    for (size_t i = 0; i < in.size(); ++i) values[i] = in[i];
    for (const auto& [v, tensor] : p->constants) values[v] = tensor;
    std::vector<kiln::Tensor> args;
    for (const Step& step : p->steps) {
      args.clear();
      for (size_t v : step.inputs) args.push_back(values[v]);
      values[step.output] = kiln::call_op(step.op, args, step.attrs)[0];
    }
    out->clear();
    for (size_t v : p->outputs) out->push_back(values[v]);
    return kiln::RunningStatus::kRunningSuccess;
  }

  void ClearGraph(kiln::BackendGraphId id) override {
    std::lock_guard<std::mutex> lock(mutex_);
    programs_.erase(id);
  }

 private:
  std::mutex mutex_;
  std::map<kiln::BackendGraphId, std::shared_ptr<const Program>> programs_;
  kiln::BackendGraphId next_id_ = 0;
};

}  // namespace

KILN_REGISTER_BACKEND("my_elementwise_backend", ElementwiseBackend);
