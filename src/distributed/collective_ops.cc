// The collective ops: AllReduce, Broadcast, AllGather, ReduceScatter, Barrier.
//
// Each kernel runs one collective of its group's communicator (Gloo or MPI; distributed/group.h):
// on the calling thread when the group is idle, else after the group's queued ones. A call with
// async_op (set only by the eager API in collectives.cc) queues it instead and returns. An async
// kernel returns at once, having noted which storage the collective writes, so that Work::wait()
// finds it; until then the pipeline treats the result as written, and the caller must not touch it
// (the contract of async_op).
//
// Gradients follow the collectives' linear algebra: AllReduce(sum) and AllReduce(avg) are their
// own adjoints, AllGather's adjoint is ReduceScatter(sum) and the other way round, and
// Broadcast's is the sum of every rank's gradient, arriving at the source.
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "distributed/communicator.h"
#include "distributed/group.h"
#include "distributed/reduction.h"
#include "kiln/functional/factory.h"
#include "kiln/op.h"

namespace kiln::distributed {
namespace {

// Note [Ranks agree on each collective]
// Ranks that ran different collectives, or one on tensors of other sizes or dtypes, made Gloo
// abort the process (its length check throws on its own event-loop thread) or exchange bytes read
// as another dtype, and MPI end the job. So before its transfer every collective gathers each
// member's Signature, a fixed 128 bytes whatever the call (so that this exchange itself always
// matches), and every member fails alike, naming each rank's call, when they differ: one small
// all-gather more per collective (bench/RESULTS.md, "Distributed: the agreement check").
struct Signature {
  char op[24] = {};    // the op's name
  char text[80] = {};  // the call, for the message (cut to fit)
  int64_t count = 0;   // elements of the input
  int32_t dtype = 0;
  int32_t detail = 0;  // the reduction, or the source's world rank
  int64_t unused = 0;  // pads to 128 bytes

  bool agrees_with(const Signature& o) const {
    return std::strncmp(op, o.op, sizeof(op)) == 0 && count == o.count && dtype == o.dtype &&
           detail == o.detail;
  }
};
static_assert(sizeof(Signature) == 128);

// `detail` is what else the members must agree on, and `detail_text` says it for the message.
Signature signature_of(const KernelContext& ctx, const std::string& what, int64_t detail,
                       const std::string& detail_text) {
  Signature s;
  std::strncpy(s.op, ctx.op.name().c_str(), sizeof(s.op) - 1);
  std::strncpy(s.text, (what + detail_text).c_str(), sizeof(s.text) - 1);
  s.count = ctx.inputs.empty() ? 0 : ctx.inputs[0].numel();
  s.dtype = ctx.inputs.empty() ? -1 : static_cast<int32_t>(ctx.inputs[0].dtype());
  s.detail = static_cast<int32_t>(detail);
  return s;
}

// Throws RanksDisagree, naming each member by its world rank (`ranks`, the group's), unless every
// member's signature agrees with `mine`.
void check_agreement(Communicator& comm, const Signature& mine, const std::vector<int>& ranks) {
  std::vector<Signature> all(ranks.size());
  comm.all_gather(&mine, all.data(), sizeof(Signature));
  bool agree = true;
  for (const Signature& theirs : all) agree = agree && theirs.agrees_with(all[0]);
  if (agree) return;
  std::ostringstream calls;
  for (size_t r = 0; r < all.size(); ++r) {
    calls << (r ? "; " : "") << "rank " << ranks[r] << " ran " << all[r].text;
  }
  throw RanksDisagree(
      "the ranks ran different collectives: " + calls.str() +
      ". Every rank must run the same collectives in the same order, on tensors of one dtype and "
      "size (and the same op and source)");
}

// Every rank's kernel has the same view of the call: the group, and whether it waits.
struct Collective {
  std::shared_ptr<Group> group;
  bool async;

  explicit Collective(const Attrs& attrs)
      : group(group_of(attrs.get<int64_t>("group"))),
        async(attrs.get_or<bool>("async_op", false)) {}

  // Runs `transfer`, which writes `result`, once the members' signatures agree (see
  // signature_of for `detail`); async: queues it and returns.
  void run(const KernelContext& ctx, const Tensor& result, CollectiveFn transfer,
           int64_t detail = 0, const std::string& detail_text = "") const {
    std::string what = op_call_str(ctx.op, metas_of(ctx.inputs));
    CollectiveFn fn = [signature = signature_of(ctx, what, detail, detail_text),
                       ranks = group->ranks(), transfer = std::move(transfer)](Communicator& comm) {
      check_agreement(comm, signature, ranks);
      transfer(comm);
    };
    if (async) {
      group->note_async_write(result.storage().get(),
                              group->enqueue(std::move(what), std::move(fn)));
    } else {
      group->run(std::move(what), std::move(fn));
    }
  }

  static MetaList metas_of(const std::vector<Tensor>& ts) {
    MetaList metas;
    for (const Tensor& t : ts) metas.push_back(TensorMeta::of(t));
    return metas;
  }
};

// The kernel's output starts as a copy of the input (the collectives work in place on it).
void copy_input_to_output(const Tensor& in, const Tensor& out) {
  const bool same = in.storage() == out.storage() && in.storage_offset() == out.storage_offset() &&
                    in.is_contiguous();
  if (!same) copy_into(out, in);
}

// A contiguous copy in memory of its own, which an async collective may keep using after the
// kernel returns (the pipeline reclaims workspaces at once).
Tensor owned_copy(const Tensor& t) {
  Tensor copy = Tensor::empty(t.shape(), t.dtype());
  copy_into(copy, t);
  return copy;
}

// The all-reduce both AllReduce and ReduceScatter run: in place, / size for avg. The 16-bit floats
// are divided first: their sum overflowed where the average did not (float16 [40000] on two
// ranks averaged to inf); float32 and float64 after, which rounds once.
void all_reduce_in_place(Communicator& c, const Tensor& t, void* data, ReduceKind kind, int size) {
  const auto n = static_cast<size_t>(t.numel());
  const bool avg = kind == ReduceKind::kAvg;
  const bool divide_first = avg && itemsize(t.dtype()) == 2;
  if (divide_first) scale_elements(t.dtype(), data, n, 1.0 / size);
  c.all_reduce(data, n, t.dtype(), avg ? ReduceKind::kSum : kind);
  if (avg && !divide_first) scale_elements(t.dtype(), data, n, 1.0 / size);
}

void all_reduce_kernel(KernelContext& ctx) {
  const Tensor& out = ctx.outputs[0];
  copy_input_to_output(ctx.inputs[0], out);
  const Collective c(ctx.attrs);
  const ReduceKind kind = reduce_kind(ctx.attrs.get<std::string>("op"));
  void* data = out.data_ptr();
  const int size = c.group->size();
  c.run(
      ctx, out,
      [out, data, kind, size](Communicator& comm) {
        all_reduce_in_place(comm, out, data, kind, size);
      },
      static_cast<int64_t>(kind) + 1, " op=" + ctx.attrs.get<std::string>("op"));
}

void broadcast_kernel(KernelContext& ctx) {
  const Tensor& out = ctx.outputs[0];
  copy_input_to_output(ctx.inputs[0], out);
  const Collective c(ctx.attrs);
  const int root = c.group->rank_of(ctx.attrs.get<int64_t>("src"));
  void* data = out.data_ptr();
  c.run(
      ctx, out, [out, data, root](Communicator& comm) { comm.broadcast(data, out.nbytes(), root); },
      ctx.attrs.get<int64_t>("src"), " src=" + std::to_string(ctx.attrs.get<int64_t>("src")));
}

void all_gather_kernel(KernelContext& ctx) {
  const Tensor input = ctx.inputs[0].is_contiguous() ? ctx.inputs[0] : owned_copy(ctx.inputs[0]);
  const Tensor& out = ctx.outputs[0];
  const Collective c(ctx.attrs);
  const void* in_data = input.data_ptr();
  void* out_data = out.data_ptr();
  c.run(ctx, out, [input, in_data, out, out_data](Communicator& comm) {
    comm.all_gather(in_data, out_data, input.nbytes());
  });
}

// An all-reduce of a scratch copy, of which this rank keeps its slice (PyTorch's Gloo backend
// does the same): twice the bytes a ring reduce-scatter would move, but one code path for Gloo,
// whose new-style API has no reduce-scatter, and MPI.
void reduce_scatter_kernel(KernelContext& ctx) {
  const Tensor scratch = owned_copy(ctx.inputs[0]);
  const Tensor& out = ctx.outputs[0];
  const Collective c(ctx.attrs);
  const ReduceKind kind = reduce_kind(ctx.attrs.get<std::string>("op"));
  void* scratch_data = scratch.data_ptr();
  void* out_data = out.data_ptr();
  const int rank = c.group->rank();
  const int size = c.group->size();
  c.run(
      ctx, out,
      [scratch, scratch_data, out, out_data, kind, rank, size](Communicator& comm) {
        all_reduce_in_place(comm, scratch, scratch_data, kind, size);
        std::memcpy(out_data, static_cast<const char*>(scratch_data) + rank * out.nbytes(),
                    out.nbytes());
      },
      static_cast<int64_t>(kind) + 1, " op=" + ctx.attrs.get<std::string>("op"));
}

void barrier_kernel(KernelContext& ctx) {
  const Tensor& token = ctx.outputs[0];
  *static_cast<bool*>(token.data_ptr()) = true;
  const Collective c(ctx.attrs);
  c.run(ctx, token, [](Communicator& comm) { comm.barrier(); });
}

MetaList same_as_input(const InferContext& ctx) {
  const TensorMeta& x = ctx.input(0);
  const ReduceKind kind = reduce_kind(ctx.attrs.get<std::string>("op"));
  KILN_CHECK_DTYPE(kind != ReduceKind::kAvg || is_floating_point(x.dtype))
      << ctx.op.name() << ": op='avg' needs a floating-point tensor, got " << x.dtype
      << "; reduce with 'sum' and divide";
  group_of(ctx.attrs.get<int64_t>("group"));  // an unknown group fails here, before the kernel
  return {x};
}

MetaList broadcast_infer(const InferContext& ctx) {
  group_of(ctx.attrs.get<int64_t>("group"))->rank_of(ctx.attrs.get<int64_t>("src"));
  return {ctx.input(0)};
}

MetaList gathered(const InferContext& ctx) {
  TensorMeta x = ctx.input(0);
  const int size = group_of(ctx.attrs.get<int64_t>("group"))->size();
  if (x.shape.empty()) x.shape = {1};
  x.shape[0] *= size;
  return {x};
}

MetaList scattered(const InferContext& ctx) {
  MetaList out = same_as_input(ctx);
  TensorMeta& x = out[0];
  const int size = group_of(ctx.attrs.get<int64_t>("group"))->size();
  KILN_CHECK_SHAPE(!x.shape.empty() && x.shape[0] % size == 0)
      << "ReduceScatter: expected dim 0 divisible by the group's size " << size << ", got shape "
      << shape_str(x.shape);
  x.shape[0] /= size;
  return out;
}

// Gradient rules: collectives of the gradients, issued in the same order on every rank because
// every rank runs the same backward.
Attrs reduce_attrs(const Attrs& attrs, const std::string& op) {
  return {{"op", op}, {"group", attrs.get<int64_t>("group")}};
}

void check_linear(const Attrs& attrs, const char* name) {
  const std::string op = attrs.get<std::string>("op");
  KILN_CHECK_VALUE(op == "sum" || op == "avg")
      << name << " is differentiable for op='sum' and op='avg', not op='" << op << "'";
}

std::vector<Tensor> all_reduce_grad(const std::vector<Tensor>&, const std::vector<Tensor>&,
                                    const Attrs& attrs, const std::vector<Tensor>& grads) {
  check_linear(attrs, "AllReduce");
  if (!grads[0].defined()) return {Tensor()};
  const std::string op = attrs.get<std::string>("op");
  return {call_op("AllReduce", {grads[0]}, reduce_attrs(attrs, op))[0]};
}

std::vector<Tensor> broadcast_grad(const std::vector<Tensor>& inputs, const std::vector<Tensor>&,
                                   const Attrs& attrs, const std::vector<Tensor>& grads) {
  const std::shared_ptr<Group> group = group_of(attrs.get<int64_t>("group"));
  const Tensor g = grads[0].defined() ? grads[0] : zeros_like(inputs[0]);
  Tensor total = call_op("AllReduce", {g}, reduce_attrs(attrs, "sum"))[0];
  const bool is_source = group->rank() == group->rank_of(attrs.get<int64_t>("src"));
  return {is_source ? total : zeros_like(inputs[0])};
}

std::vector<Tensor> all_gather_grad(const std::vector<Tensor>& inputs, const std::vector<Tensor>&,
                                    const Attrs& attrs, const std::vector<Tensor>& grads) {
  if (!grads[0].defined()) return {Tensor()};
  const Tensor g = call_op("ReduceScatter", {grads[0]}, reduce_attrs(attrs, "sum"))[0];
  return {g.reshape(inputs[0].shape())};
}

std::vector<Tensor> reduce_scatter_grad(const std::vector<Tensor>&, const std::vector<Tensor>&,
                                        const Attrs& attrs, const std::vector<Tensor>& grads) {
  check_linear(attrs, "ReduceScatter");
  if (!grads[0].defined()) return {Tensor()};
  Tensor g = call_op("AllGather", {grads[0]}, {{"group", attrs.get<int64_t>("group")}})[0];
  if (attrs.get<std::string>("op") == "avg") {
    g = call_op("Mul", {g, Tensor::scalar(1.0 / group_of(attrs.get<int64_t>("group"))->size())})[0];
  }
  return {g};
}

constexpr const char* kAsyncDoc =
    " async_op (set by the eager API only) queues the transfer and returns; "
    "kiln::distributed::Work::wait() completes it.";

KILN_REGISTER_OP(OpDef("AllReduce")
                     .input("x")
                     .attr("op", AttrKind::kString, std::string("sum"))
                     .attr("group", AttrKind::kInt, int64_t{0})
                     .attr("async_op", AttrKind::kBool, false)
                     .infer(same_as_input)
                     .kernel(DeviceType::kCPU, all_reduce_kernel)
                     .grad(all_reduce_grad)
                     .traits(kTraitSideEffect)
                     .doc(std::string("Reduces x across the ranks of `group` (op: sum, prod, min, "
                                      "max or avg); every rank gets the result.") +
                          kAsyncDoc));

KILN_REGISTER_OP(OpDef("Broadcast")
                     .input("x")
                     .attr("src", AttrKind::kInt)
                     .attr("group", AttrKind::kInt, int64_t{0})
                     .attr("async_op", AttrKind::kBool, false)
                     .infer(broadcast_infer)
                     .kernel(DeviceType::kCPU, broadcast_kernel)
                     .grad(broadcast_grad)
                     .traits(kTraitSideEffect)
                     .doc(std::string("Every rank of `group` gets world rank src's x.") +
                          kAsyncDoc));

KILN_REGISTER_OP(OpDef("AllGather")
                     .input("x")
                     .attr("group", AttrKind::kInt, int64_t{0})
                     .attr("async_op", AttrKind::kBool, false)
                     .infer(gathered)
                     .kernel(DeviceType::kCPU, all_gather_kernel)
                     .grad(all_gather_grad)
                     .traits(kTraitSideEffect)
                     .doc(std::string("Every rank's x stacked along dim 0 in group-rank order.") +
                          kAsyncDoc));

KILN_REGISTER_OP(OpDef("ReduceScatter")
                     .input("x")
                     .attr("op", AttrKind::kString, std::string("sum"))
                     .attr("group", AttrKind::kInt, int64_t{0})
                     .attr("async_op", AttrKind::kBool, false)
                     .infer(scattered)
                     .kernel(DeviceType::kCPU, reduce_scatter_kernel)
                     .grad(reduce_scatter_grad)
                     .traits(kTraitSideEffect)
                     .doc(std::string("Reduces x across `group` and keeps this rank's slice of "
                                      "dim 0 (dim 0 / group size rows).") +
                          kAsyncDoc));

KILN_REGISTER_OP(OpDef("Barrier")
                     .attr("group", AttrKind::kInt, int64_t{0})
                     .attr("async_op", AttrKind::kBool, false)
                     .infer([](const InferContext& ctx) {
                       group_of(ctx.attrs.get<int64_t>("group"));
                       return MetaList{TensorMeta(DType::kBool, {})};
                     })
                     .kernel(DeviceType::kCPU, barrier_kernel)
                     .traits(kTraitSideEffect | kTraitNotDifferentiable)
                     .doc("Waits until every rank of `group` has reached it; returns a bool "
                          "token (true) that later ops may depend on."));

}  // namespace
}  // namespace kiln::distributed
