// The backward pass: backward() and grad() over the graph of recorded calls.
//
// Note [Engine]
// The graph is a DAG of Nodes; an output's gradient enters at its grad_fn (or a leaf's
// accumulator). A node runs once every node that sends it a gradient has run: the engine counts,
// for each node reachable from the roots, the edges that reach it, and runs nodes whose count
// dropped to zero (Kahn's order, with an explicit stack: graphs of a million ops do not recurse).
// Gradients arriving at the same output are summed. Each node's gradient rule runs with grad
// mode set to create_graph: off, its ops are plain eager calls; on, they are recorded, so the
// gradients can be differentiated again. grad() only runs nodes from which a requested input can
// be reached, and reads the requested gradients instead of accumulating into .grad.
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "autograd/nodes.h"
#include "kiln/autocast.h"
#include "kiln/functional/elementwise.h"
#include "kiln/functional/factory.h"
#include "kiln/runtime.h"

namespace kiln::autograd {
namespace {

struct Capture {
  std::vector<Node::Edge> edges;  // where each requested input's gradient arrives
  std::vector<Tensor> grads;
};

// Note [Backward through one node from several threads]
// Threads may run backward through one graph at once. A backward without retain_graph frees what
// each node saved right after applying it, so no other thread may be applying that node then:
// its rule would read what is being cleared. Each apply claims its node here: a freeing one
// alone, a retaining one beside other retaining ones. A backward that meets a node claimed in a
// way that conflicts raises the "second time" error, as PyTorch's does. Leaves' accumulators save
// nothing and are shared by every graph that uses the leaf: they are never claimed.
class ApplyClaim {
 public:
  ApplyClaim(Node& node, bool frees)
      : node_(dynamic_cast<AccumulateGrad*>(&node) ? nullptr : &node) {
    if (node_ == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex());
    int& claims = table()[node_];
    const bool conflict = claims < 0 || (frees && claims > 0);
    KILN_CHECK_VALUE(!conflict)
        << "backward through " << node_->name() << " a second time: another thread's backward "
        << "is running through it, and one of the two frees what it saved; pass "
        << "retain_graph=true to backwards that run through one graph at the same time";
    claims = frees ? -1 : claims + 1;
  }
  ~ApplyClaim() {
    if (node_ == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex());
    auto it = table().find(node_);
    if (it->second <= 1) {
      table().erase(it);
    } else {
      --it->second;
    }
  }
  ApplyClaim(const ApplyClaim&) = delete;
  ApplyClaim& operator=(const ApplyClaim&) = delete;

 private:
  // Claims by node: the number of retaining applies, or -1 for a freeing one.
  static std::unordered_map<const Node*, int>& table() {
    static auto* claims = new std::unordered_map<const Node*, int>();
    return *claims;
  }
  static std::mutex& mutex() {
    static auto* m = new std::mutex();
    return *m;
  }
  Node* node_;
};

// n's gradients. A rule that fails may fail because a forward call failed in an asynchronous
// pipeline that no read has raised yet (an out= tensor of the wrong shape is left as it was, and
// its gradient then has the wrong shape): that failure, the cause, is raised instead, as the
// next sync point would.
std::vector<Tensor> apply_raising_the_cause(Node& n, const std::vector<Tensor>& grads) {
  try {
    return n.apply(grads);
  } catch (const Error&) {
    runtime::synchronize();  // raises the first failure since the last sync point, if any
    throw;
  }
}

void accumulate(Tensor& slot, const Tensor& g) {
  if (!g.defined()) return;
  slot = slot.defined() ? add(slot, g) : g;
}

// The starting gradients: given ones checked against the outputs, or ones for one-element outputs.
std::vector<Tensor> root_gradients(const std::vector<Tensor>& outputs,
                                   const std::vector<Tensor>& grad_outputs, const char* what) {
  KILN_CHECK_VALUE(grad_outputs.empty() || grad_outputs.size() == outputs.size())
      << what << ": got " << grad_outputs.size() << " output gradients for " << outputs.size()
      << " outputs";
  std::vector<Tensor> grads;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!grad_outputs.empty() && grad_outputs[i].defined()) {
      KILN_CHECK_SHAPE(grad_outputs[i].shape() == outputs[i].shape())
          << what << ": the gradient of output " << i << " has shape "
          << shape_str(grad_outputs[i].shape()) << ", expected " << shape_str(outputs[i].shape());
      grads.push_back(grad_outputs[i]);
      continue;
    }
    // No gradient given (none at all, or an undefined one): 1 for a one-element output.
    KILN_CHECK_VALUE(outputs[i].numel() == 1)
        << what << ": output " << i << " has shape " << shape_str(outputs[i].shape())
        << "; a gradient is implied only for one-element outputs, pass its gradient";
    grads.push_back(ones_like(outputs[i]));
  }
  return grads;
}

void run_graph(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
               bool retain_graph, bool create_graph, Capture* capture, const char* what) {
  KILN_CHECK_VALUE(!outputs.empty()) << what << ": expected at least one output";
  std::vector<Node::Edge> roots;
  for (size_t i = 0; i < outputs.size(); ++i) {
    KILN_CHECK_VALUE(outputs[i].defined()) << what << ": output " << i << " is undefined";
    roots.push_back(gradient_edge(outputs[i]));
    KILN_CHECK_VALUE(roots.back().valid())
        << what << ": output " << i << " does not require grad (no input of the ops that made "
        << "it requires grad, it was computed with grad mode off, or it is a result of a kiln.jit "
        << "function, which carries no gradient: differentiate inside it, "
        << "kiln.jit(kiln.grad(f)))";
  }
  const std::vector<Tensor> root_grads = root_gradients(outputs, grad_outputs, what);

  // Every reachable node with the number of edges that reach it.
  std::unordered_map<Node*, size_t> dependencies;
  {
    std::vector<Node*> stack;
    for (const Node::Edge& e : roots) {
      if (dependencies.emplace(e.node.get(), 0).second) stack.push_back(e.node.get());
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      for (const Node::Edge& e : n->next_edges()) {
        if (!e.valid()) continue;
        auto [it, inserted] = dependencies.emplace(e.node.get(), 0);
        ++it->second;
        if (inserted) stack.push_back(e.node.get());
      }
    }
  }
  // With a capture, only nodes from which a requested gradient can be reached need to run:
  // decided children first, over a topological order (parents before children, Kahn's).
  std::unordered_set<Node*> needed;
  std::unordered_set<Node*> targets;
  if (capture != nullptr) {
    for (const Node::Edge& e : capture->edges) {
      if (e.valid()) targets.insert(e.node.get());
    }
    std::unordered_map<Node*, size_t> remaining = dependencies;
    std::vector<Node*> order, stack;
    for (const auto& [n, count] : remaining) {
      if (count == 0) stack.push_back(n);
    }
    while (!stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      order.push_back(n);
      for (const Node::Edge& e : n->next_edges()) {
        if (e.valid() && --remaining[e.node.get()] == 0) stack.push_back(e.node.get());
      }
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Node* n = *it;
      for (const Node::Edge& e : n->next_edges()) {
        if (e.valid() && (targets.count(e.node.get()) || needed.count(e.node.get()))) {
          needed.insert(n);
          break;
        }
      }
    }
  }

  GradModeGuard mode(create_graph);
  // The gradient rules compute in the dtypes the forward pass chose (kiln/autocast.h).
  const AutocastGuard no_autocast(autocast_state().dtype, /*enabled=*/false);
  std::unordered_map<Node*, std::vector<Tensor>> buffers;
  auto buffer_of = [&](Node* n) -> std::vector<Tensor>& {
    std::vector<Tensor>& b = buffers[n];
    if (b.size() < n->num_outputs()) b.resize(n->num_outputs());
    return b;
  };
  for (size_t i = 0; i < roots.size(); ++i) {
    accumulate(buffer_of(roots[i].node.get())[roots[i].input_nr], root_grads[i]);
  }
  std::vector<Node*> ready;
  std::unordered_set<Node*> queued;
  for (const Node::Edge& e : roots) {
    if (dependencies[e.node.get()] == 0 && queued.insert(e.node.get()).second) {
      ready.push_back(e.node.get());
    }
  }
  while (!ready.empty()) {
    Node* n = ready.back();
    ready.pop_back();
    std::vector<Tensor> grads = std::move(buffer_of(n));
    buffers.erase(n);
    const bool run = capture == nullptr || needed.count(n) != 0;
    // grad() evaluates nothing else: the hooks of tensors off its paths do not run.
    if (run || targets.count(n) != 0) run_grad_hooks(*n, grads);
    if (capture != nullptr) {
      for (size_t k = 0; k < capture->edges.size(); ++k) {
        if (capture->edges[k].node.get() == n) {
          capture->grads[k] = grads.at(capture->edges[k].input_nr);
        }
      }
    }
    bool any_gradient = false;
    for (const Tensor& g : grads) any_gradient = any_gradient || g.defined();
    std::vector<Tensor> input_grads;
    if (run && any_gradient) {
      const ApplyClaim claim(*n, /*frees=*/!retain_graph);
      input_grads = apply_raising_the_cause(*n, grads);
      if (!retain_graph) n->release_saved();
    }
    const std::vector<Node::Edge>& edges = n->next_edges();
    for (size_t i = 0; i < edges.size(); ++i) {
      const Node::Edge& e = edges[i];
      if (!e.valid()) continue;
      if (i < input_grads.size()) accumulate(buffer_of(e.node.get())[e.input_nr], input_grads[i]);
      if (--dependencies[e.node.get()] == 0 && queued.insert(e.node.get()).second) {
        ready.push_back(e.node.get());
      }
    }
  }
}

// The gradients of `outputs` with respect to `inputs` (undefined for an input they do not reach),
// running only the nodes on the way to them; `what` names the caller in errors. With
// `retain_non_leaves`, the inputs that are not leaves retain their gradient (retain_grad) once
// checked, so this run already adds into their .grad.
std::vector<Tensor> captured_grads(const std::vector<Tensor>& outputs,
                                   const std::vector<Tensor>& inputs,
                                   const std::vector<Tensor>& grad_outputs, bool retain_graph,
                                   bool create_graph, bool retain_non_leaves, const char* what) {
  KILN_CHECK_VALUE(!inputs.empty()) << what << ": expected at least one input";
  Capture capture;
  for (size_t k = 0; k < inputs.size(); ++k) {
    KILN_CHECK_VALUE(inputs[k].defined() && requires_grad(inputs[k]))
        << what << ": input " << k << " does not require grad";
    capture.edges.push_back(gradient_edge(inputs[k]));
  }
  if (retain_non_leaves) {
    for (const Tensor& t : inputs) retain_grad(t);  // nothing for a leaf
  }
  capture.grads.resize(inputs.size());
  run_graph(outputs, grad_outputs, retain_graph || create_graph, create_graph, &capture, what);
  return capture.grads;
}

}  // namespace

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              bool retain_graph, bool create_graph) {
  run_graph(outputs, grad_outputs, retain_graph || create_graph, create_graph, nullptr,
            "backward");
}

void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs,
              bool retain_graph, bool create_graph, const std::vector<Tensor>& inputs) {
  // As PyTorch: a non-leaf input retains its gradient from now on (its hook adds this run's);
  // a leaf's accumulator, which the capture stops at, is applied here.
  const std::vector<Tensor> grads =
      captured_grads(outputs, inputs, grad_outputs, retain_graph, create_graph,
                     /*retain_non_leaves=*/true, "backward");
  // Under create_graph the additions into .grad are recorded, as the engine's own are.
  GradModeGuard mode(create_graph);
  std::unordered_set<const TensorImpl*> accumulated;  // a leaf named twice gets its gradient once
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (is_leaf(inputs[k]) && grads[k].defined() && accumulated.insert(inputs[k].impl()).second) {
      AccumulateGrad::of(inputs[k])->apply({grads[k]});
    }
  }
}

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool create_graph, bool allow_unused) {
  std::vector<Tensor> grads =
      captured_grads(outputs, inputs, grad_outputs, retain_graph, create_graph,
                     /*retain_non_leaves=*/false, "grad");
  for (size_t k = 0; k < inputs.size(); ++k) {
    KILN_CHECK_VALUE(allow_unused || grads[k].defined())
        << "grad: input " << k << " is not used to compute the outputs (pass allow_unused=true "
        << "to get an undefined gradient for it)";
  }
  return grads;
}

}  // namespace kiln::autograd
