// Trace: records the ops a function calls as a FuncGraph (private to libkiln, the Python bindings
// and the tests; users call kiln::trace or kiln::jit, kiln/jit.h).
//
//   kiln::jit_detail::Trace trace("f");             // this thread's op calls are recorded now
//   kiln::Tensor x = trace.add_input(meta, "x");     // a tracer: dtype and shape, no data
//   kiln::Tensor y = kiln::sin(x) * 2.0;             // two CNodes; y is a tracer too
//   kiln::FuncGraphPtr g = trace.finish({y});        // the graph; recording stops
//
// See Note [Tracing] in trace.cc for how tensors map to nodes.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/export.h"
#include "kiln/ir.h"
#include "kiln/op.h"

namespace kiln::jit_detail {

/// The text every read of a traced value's data raises (a kiln::Error of kind kType), so that
/// front ends can recognise it and add where it happened.
KILN_API extern const char* const kTracedValueHasNoData;

/// What a traced function wrote into in place (Trace::writes()): the graph's last outputs are the
/// final values of `tensors` (from outside the trace: a weight, an optimizer's state), then of
/// the graph's parameters `inputs` (arguments of each call), in that order.
struct Writes {
  struct Input {
    size_t position;    // among the graph's parameters
    bool grad_enabled;  // written (at least once) while grad mode was on
    bool operator==(const Input& other) const {
      return position == other.position && grad_enabled == other.grad_enabled;
    }
  };
  std::vector<Tensor> tensors;
  std::vector<Input> inputs;
  /// When inputs are written: the tensors from outside the function read (Trace::captured), which
  /// a written argument must not be.
  std::vector<Tensor> captured;

  size_t size() const { return tensors.size() + inputs.size(); }
};

/// Before a run of a graph with `writes` on parameters `params`: throws kValue when a written
/// tensor shares memory with a parameter (other than itself) or a written parameter with a
/// tensor the function reads from outside (the graph read them as separate values, where eager
/// mode would have seen the write through both), or when a written parameter requires grad and
/// was written while grad mode was on (eager mode refuses that for a leaf and records it for
/// another tensor; the graph's write is no op autograd sees).
KILN_API void check_writes(const Writes& writes, const std::vector<Tensor>& params);

/// After that run: copies the extra outputs at the end of `outputs` into the tensors written and
/// removes them from `outputs`. The copies are eager ops, queued behind the run.
KILN_API void write_back(const Writes& writes, const std::vector<Tensor>& params,
                         std::vector<Tensor>& outputs);

/// A tracing session: while alive it is the calling thread's dispatcher (set_thread_dispatcher),
/// so every op the thread calls becomes a CNode and returns tracers. One per thread at a time.
class KILN_API Trace final : public Dispatcher {
 public:
  /// Starts recording into a new graph named `graph_name`. Throws kValue when this thread is
  /// already tracing.
  explicit Trace(std::string graph_name);
  /// Stops recording (when finish() was not called, e.g. because the function threw).
  ~Trace() override;
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  /// A new graph parameter and the tracer that stands for it. `name` may be empty.
  Tensor add_input(const TensorMeta& meta, const std::string& name);
  /// Stops recording and returns the graph whose outputs are `outputs`: tracers, or tensors from
  /// outside the trace (constants). Throws kType for an undefined output. When the function wrote
  /// into tensors from outside or into its inputs (writes()), their final values follow as extra
  /// outputs.
  FuncGraphPtr finish(const std::vector<Tensor>& outputs);
  /// The tensors from outside the trace the function wrote into, in place (an optimizer's update
  /// of a weight), and the inputs it wrote into (by position), each in order of first write:
  /// after each run of the graph, write_back copies the extra outputs into them (see Note
  /// [Tracing]).
  const Writes& writes() const { return writes_; }
  /// The tensors from outside the trace that became constants (the weights the function reads),
  /// in order of first use.
  const std::vector<Tensor>& captured() const { return captured_; }

  /// True while a Trace records this thread's op calls.
  static bool active();
  /// The Trace recording this thread's op calls, or null.
  static Trace* current();
  /// True when `t` is a tracer of this Trace or a view of one.
  bool is_tracer(const Tensor& t) const;
  /// See kiln::note_size_decision.
  void note_size_decision() { size_decisions_ = true; }
  /// Whether the traced function noted a decision from a size (note_size_decision).
  bool size_decisions() const { return size_decisions_; }

  TensorList dispatch(const OpDef& op, TensorSpan inputs, const Attrs& attrs,
                      const std::vector<Tensor>& out,
                      const std::shared_ptr<BoundKernel>& bound_kernel) override;

 private:
  struct Traced {
    NodePtr node;              // the value the storage holds now (in-place ops move it on)
    std::shared_ptr<Storage> storage;  // kept alive: its address is the key
    int64_t input = -1;                // a graph parameter's position, or -1
  };
  struct Memo {
    Tensor tensor;             // kept alive: its impl's address is the key
    NodePtr node;
    NodePtr base;  // for a view of a traced value: the value it was made from
  };

  /// A tracer of `node`; `input` is its parameter position, or -1 for an op's result.
  Tensor make_tracer(const TensorMeta& meta, const NodePtr& node, int64_t input);
  NodePtr node_of(const Tensor& t);
  NodePtr view_node(const Tensor& t, const NodePtr& value);
  NodePtr constant_node(const Tensor& t);
  void remember_outside(const Tensor& t, NodePtr node);
  const Memo* same_outside_view(const TensorImpl& impl) const;
  TensorList record_inplace(const OpDef& op, const CNodePtr& node, const std::vector<Tensor>& out);
  TensorList record_views(const CNodePtr& node, TensorList views);
  std::unordered_map<const Storage*, Traced>::iterator adopt_written(const OpDef& op,
                                                                     const Tensor& target);
  void stop();

  FuncGraphPtr graph_;
  Dispatcher* previous_ = nullptr;
  const char* previous_refusal_ = nullptr;  // autograd::set_grad_accumulation_refused's
  bool recording_ = false;
  std::shared_ptr<const OpFailure> no_data_;  // every tracer carries it: reads raise it
  std::unordered_map<const Storage*, Traced> traced_;
  std::unordered_map<const TensorImpl*, Memo> memo_;  // views and captured tensors
  // memo_'s tensors of memory from outside the trace, by storage: another handle of one of them
  // (an alias autograd saved) is the same node (same_outside_view).
  std::unordered_multimap<const Storage*, const TensorImpl*> outside_by_storage_;
  Writes writes_;  // tensors from outside and inputs written in place, in order
  std::vector<const Storage*> input_storages_;  // each parameter's tracer's, by position
  std::vector<Tensor> captured_;  // tensors from outside read, in order (captured())
  bool size_decisions_ = false;
};

}  // namespace kiln::jit_detail
