// compile(): kernel selection and the memory plan for kiln_cpu (see cpu_program.h).
#include "backend/cpu/cpu_program.h"

#include <unordered_map>

#include "backend/cpu/memory_planner.h"
#include "ops/dtype_convert.h"

namespace kiln::cpu {
namespace {

size_t nbytes_of(const TensorMeta& m) {
  return static_cast<size_t>(m.numel()) * itemsize(m.dtype);
}

bool is_view_op(const OpDef& op) { return op.has_trait(kTraitView) && op.view_fn() != nullptr; }

// Lays out the steps and the values they read and write.
class Compiler {
 public:
  explicit Compiler(const FuncGraph& graph) : graph_(graph), p_(std::make_shared<CpuProgram>()) {}

  std::shared_ptr<const CpuProgram> run() {
    p_->name = graph_.name();
    p_->registry_generation = OpRegistry::Instance().generation();
    for (const ParameterPtr& param : graph_.parameters()) {
      const uint32_t v = new_value(param->abstract().tensor(), Home::kInput);
      value_of_[param.get()] = v;
      p_->parameters.push_back(param->abstract().tensor());
      p_->parameter_names.push_back(param->debug_string());
      p_->parameter_values.push_back(v);
    }
    for (const NodePtr& n : graph_.topological_order()) {
      if (n->is_parameter() || n == graph_.return_node()) continue;
      if (n->is_value()) {
        value_of_[n.get()] = add_constant(static_cast<const ValueNode&>(*n).value());
        continue;
      }
      add_step(static_cast<const CNode&>(*n));
    }
    for (const NodePtr& out : graph_.outputs()) p_->outputs.push_back(value_of_.at(out.get()));
    place_values();
    return p_;
  }

 private:
  uint32_t new_value(TensorMeta meta, Home home) {
    layout_.push_back(Tensor());  // contiguous; a view's is set by add_step
    constant_.push_back(Tensor());
    p_->values.push_back(Value{std::move(meta), home, 0});
    root_.push_back(static_cast<uint32_t>(p_->values.size() - 1));
    return root_.back();
  }

  uint32_t add_constant(const Tensor& value) {
    const uint32_t v = new_value(TensorMeta::of(value), Home::kConstant);
    constant_[v] = value;
    p_->constants.emplace_back(v, value);
    return v;
  }

  // A tensor with `v`'s shape and strides over no memory of its own, for asking a view op at
  // Build whether it will be a view at run time. Data is never read.
  Tensor layout_of(uint32_t v) {
    if (layout_[v].defined()) return layout_[v];
    static char nothing[64];
    const TensorMeta& meta = p_->values[v].meta;
    return Tensor::from_blob(nothing, meta.shape, meta.dtype);
  }

  // Whether a view op's outputs are views of its input given the layouts known at Build (graph
  // inputs and constants contiguous); when not, the step copies into planned memory instead.
  // (A graph input passed with other strides may still make a view step copy at run time.)
  bool view_at_run(const Step& step, const OpDef& op) {
    std::vector<Tensor> proxies;
    for (uint32_t v : step.inputs) proxies.push_back(layout_of(v));
    try {
      view_layouts_ = op.view_fn()(proxies, step.attrs);
    } catch (const Error&) {
      view_layouts_.clear();  // let the kernel report it at run time
    }
    return !view_layouts_.empty();
  }

  // A view of constants (a captured w.T is a Permute of its storage's constant, Note [Strided
  // constants] in jit/trace.cc) is a constant itself, made now over the same memory: runs see
  // in-place updates of it, and products by it are packed as those by w are.
  bool view_of_constants(const Step& step, const CNode& c) {
    std::vector<Tensor> inputs;
    for (uint32_t v : step.inputs) {
      if (p_->values[v].home != Home::kConstant || !constant_[v].defined()) return false;
      inputs.push_back(constant_[v]);
    }
    TensorList views;
    try {
      views = step.op->view_fn()(inputs, step.attrs);
    } catch (const Error&) {
      return false;  // the kernel reports it at run time
    }
    if (views.empty()) return false;
    value_of_[&c] = add_constant(views[0]);
    for (size_t k = 1; k < views.size(); ++k) add_constant(views[k]);  // the next values
    return true;
  }

  void add_step(const CNode& c) {
    const Primitive& prim = *c.primitive();
    if (prim.is_tuple_get_item()) {
      value_of_[&c] = value_of_.at(c.input(0).get()) +
                      static_cast<uint32_t>(prim.attrs().get<int64_t>("index"));
      return;
    }
    Step step;
    step.op = prim.op_def();
    step.attrs = prim.normalized_attrs();
    const OpDef& op = *step.op;
    for (const NodePtr& in : c.inputs()) step.inputs.push_back(value_of_.at(in.get()));
    if (is_view_op(op) && view_of_constants(step, c)) return;
    if (op.name() == fused::kOpName) {
      step.kind = StepKind::kFused;
      step.program = fused::parse_program(step.attrs.get<std::string>("program"));
      convert_scalars(step, c.abstract().dtype());
    } else if (is_view_op(op) && view_at_run(step, op)) {
      step.kind = StepKind::kView;
    }
    // A view falls back to the kernel when its input's layout needs a copy.
    step.kernel = op.find_kernel(DeviceType::kCPU);
    KILN_CHECK_KIND(ErrorKind::kNotImplemented,
                    step.kernel != nullptr || step.kind == StepKind::kFused)
        << "kiln_cpu: op '" << op.name() << "' has no CPU kernel (" << c.debug_string() << ")";
    const Home home = step.kind == StepKind::kView ? Home::kView : Home::kArena;
    const auto add_output = [&](const TensorMeta& meta) {
      const uint32_t v = new_value(meta, home);
      if (home == Home::kView) {
        root_[v] = root_[step.inputs.at(0)];
        layout_[v] = view_layouts_[step.outputs.size()];
      }
      step.outputs.push_back(v);
    };
    if (c.abstract().is_tuple()) {
      for (const TensorMeta& e : c.abstract().elements()) add_output(e);
    } else {
      add_output(c.abstract().tensor());
    }
    if (step.kind == StepKind::kKernel) pack_matmul(step, c);
    if (step.kind == StepKind::kPackedMatmul) {
      step.workspace_bytes = step.matmul->scratchpad_bytes();
    } else if (op.workspace_fn()) {
      MetaList metas;
      for (uint32_t v : step.inputs) metas.push_back(p_->values[v].meta);
      step.workspace_bytes = op.workspace_fn()(InferContext{op, metas, step.attrs});
    }
    value_of_[&c] = step.outputs[0];
    p_->ops.push_back(step.op);
    p_->steps.push_back(std::move(step));
  }

  // A float32 product by a constant 2-d weight becomes a PackedMatmul (packed_matmul.h).
  void pack_matmul(Step& step, const CNode& c) {
    const std::string& name = step.op->name();
    const bool linear = name == "Linear";
    const bool fused = name == "FusedMatMul";
    if (!linear && !fused && name != "MatMul") return;
    const TensorMeta& x = p_->values[step.inputs[0]].meta;
    const uint32_t w = step.inputs[1];
    const TensorMeta& weight = p_->values[w].meta;
    if (c.abstract().dtype() != DType::kFloat32 || x.dtype != DType::kFloat32 ||
        weight.dtype != DType::kFloat32 || weight.ndim() != 2 ||
        p_->values[w].home != Home::kConstant || x.ndim() < (linear || fused ? 1 : 2)) {
      return;
    }
    const bool transposed = linear || (fused && step.attrs.get<bool>("transpose_weight"));
    const int64_t k = x.shape.back();
    const int64_t n = transposed ? weight.shape[0] : weight.shape[1];
    const int64_t rows = k > 0 ? x.numel() / k : 0;
    if (rows == 0 || k == 0 || n == 0) return;
    const bool has_bias = step.inputs.size() > 2 && p_->values[step.inputs[2]].meta.defined;
    std::optional<simd::UnaryOp> activation;
    if (fused && step.attrs.get<std::string>("activation") != "none") {
      activation = fused::unary_instruction(step.attrs.get<std::string>("activation"));
    }
    step.matmul = PackedMatmul::make(rows, k, n, constant_[w], transposed, has_bias, activation);
    step.kind = StepKind::kPackedMatmul;
  }

  // Python numbers read by a fused step become constants of its compute dtype now, not at every
  // run: float32 for a 16-bit step, whose numbers keep their float32 value (Note [Scalars of
  // 16-bit ops] in ops/elementwise.h).
  void convert_scalars(Step& step, DType dtype) {
    for (uint32_t& v : step.inputs) {
      if (p_->values[v].home != Home::kConstant || !p_->values[v].meta.weak) continue;
      v = add_constant(as_dtype(constant_[v], compute_dtype(dtype)));
    }
  }

  // Liveness over storage roots (a view keeps its root's memory alive), in-place candidates,
  // then offsets in the arena.
  void place_values() {
    std::vector<Value>& values = p_->values;
    const size_t num_steps = p_->steps.size();
    std::vector<uint32_t> first(values.size(), 0), last(values.size(), 0);
    std::vector<bool> viewed(values.size(), false);
    for (uint32_t s = 0; s < num_steps; ++s) {
      const Step& step = p_->steps[s];
      for (uint32_t v : step.outputs) {
        first[v] = last[v] = s;
        if (values[v].home == Home::kView) viewed[root_[v]] = true;
      }
      for (uint32_t v : step.inputs) last[root_[v]] = std::max(last[root_[v]], s);
    }
    size_t output_bytes = 0;
    for (uint32_t v : p_->outputs) {
      Value& root = values[root_[v]];
      if (root.home == Home::kArena) {
        root.home = Home::kOwn;
        output_bytes += nbytes_of(root.meta);
      }
    }

    std::vector<BufferRequest> requests;
    std::vector<int64_t> request_of(values.size(), -1);
    std::vector<std::pair<size_t, size_t>> workspace_request;  // (step, request)
    for (uint32_t s = 0; s < num_steps; ++s) {
      const Step& step = p_->steps[s];
      const bool elementwise =
          step.kind == StepKind::kFused ||
          (step.op->has_trait(kTraitElementwise) && step.op->has_trait(kTraitInPlace));
      for (uint32_t v : step.outputs) {
        if (values[v].home != Home::kArena) continue;
        BufferRequest req{nbytes_of(values[v].meta), s, last[v], -1};
        if (elementwise && step.outputs.size() == 1) {
          for (uint32_t in : step.inputs) {
            if (values[in].home == Home::kArena && root_[in] == in && !viewed[in] &&
                last[in] == s && values[in].meta == values[v].meta) {
              req.in_place_of = request_of[in];
              break;
            }
          }
        }
        request_of[v] = static_cast<int64_t>(requests.size());
        requests.push_back(req);
      }
      if (step.workspace_bytes > 0) {
        workspace_request.emplace_back(s, requests.size());
        requests.push_back(BufferRequest{step.workspace_bytes, s, s, -1});
      }
    }
    const ArenaPlan plan = plan_arena(requests);
    for (size_t v = 0; v < values.size(); ++v) {
      if (request_of[v] >= 0) values[v].offset = plan.offsets[request_of[v]];
    }
    for (const auto& [s, r] : workspace_request) p_->steps[s].workspace_offset = plan.offsets[r];

    BackendMemoryPlan& m = p_->memory;
    m.arena_bytes = plan.arena_bytes;
    m.output_bytes = output_bytes;
    m.peak_bytes = plan.arena_bytes + output_bytes;
    for (const BufferRequest& r : requests) m.unshared_bytes += aligned_bytes(r.bytes);
    m.buffers = requests.size() - workspace_request.size();
    m.in_place = plan.in_place;
  }

  const FuncGraph& graph_;
  std::shared_ptr<CpuProgram> p_;
  std::unordered_map<const Node*, uint32_t> value_of_;
  std::vector<uint32_t> root_;  // per value: the value whose memory it uses
  std::vector<Tensor> layout_;  // per view value: its strides (see layout_of)
  std::vector<Tensor> constant_;  // per constant value: its tensor
  std::vector<Tensor> view_layouts_;  // the outputs of the last view_at_run
};

}  // namespace

std::shared_ptr<const CpuProgram> compile(const FuncGraph& graph) { return Compiler(graph).run(); }

}  // namespace kiln::cpu
