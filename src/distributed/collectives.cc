// The eager collective API of kiln/distributed.h: each function is one call of a collective op
// (distributed/collective_ops.cc); async calls return a Work that finds the collective the op's
// kernel queued.
#include "distributed/group.h"
#include "kiln/autograd.h"
#include "kiln/jit.h"
#include "kiln/op.h"

namespace kiln::distributed {
namespace {

// Waits for the pipeline to launch the op (reading the result's data does), then for the
// collective its kernel queued on the group's thread.
class AsyncWork final : public Work {
 public:
  AsyncWork(Tensor result, std::shared_ptr<Group> group)
      : result_(std::move(result)), group_(std::move(group)) {}

  void wait() override {
    result_.data_ptr();  // rethrows the op's failure, if it failed before its kernel ran
    const uint64_t seq = group_->last_async_write(result_.storage().get());
    if (seq != 0) group_->wait_for(seq);
  }

 private:
  Tensor result_;
  std::shared_ptr<Group> group_;
};

class FinishedWork final : public Work {
 public:
  void wait() override {}
};

// A call is async only where the kernel writes the caller's tensor itself: inside a traced
// function a collective is a graph node the backend runs in order, and an output of another
// layout or dtype is converted right after the kernel returns, before an async transfer is done.
struct Call {
  std::shared_ptr<Group> group;
  bool async;

  Call(const std::shared_ptr<ProcessGroup>& requested, bool async_op, const Tensor& output,
       const Tensor& input)
      : group(group_of(requested)),
        async(async_op && !is_tracing() && output.is_contiguous() &&
              output.dtype() == input.dtype()) {}

  // The caller's handle: for an async request that ran as a blocking call, a finished Work.
  std::shared_ptr<Work> finish(const Tensor& result, bool async_op) const {
    if (async) return std::make_shared<AsyncWork>(result, group);
    return async_op ? std::make_shared<FinishedWork>() : nullptr;
  }
};

}  // namespace

std::shared_ptr<Work> all_reduce(Tensor& tensor, const std::string& op,
                                 const std::shared_ptr<ProcessGroup>& group, bool async_op) {
  const Call c(group, async_op, tensor, tensor);
  call_op("AllReduce", {tensor},
          {{"op", op}, {"group", int64_t{c.group->id()}}, {"async_op", c.async}}, {tensor});
  return c.finish(tensor, async_op);
}

std::shared_ptr<Work> broadcast(Tensor& tensor, int src, const std::shared_ptr<ProcessGroup>& group,
                                bool async_op) {
  const Call c(group, async_op, tensor, tensor);
  call_op("Broadcast", {tensor},
          {{"src", int64_t{src}}, {"group", int64_t{c.group->id()}}, {"async_op", c.async}},
          {tensor});
  return c.finish(tensor, async_op);
}

std::shared_ptr<Work> all_gather(Tensor& output, const Tensor& input,
                                 const std::shared_ptr<ProcessGroup>& group, bool async_op) {
  const Call c(group, async_op, output, input);
  // Reading a tensor that requires grad is fine here: this in-place form records nothing.
  call_op("AllGather", {autograd::detach(input)},
          {{"group", int64_t{c.group->id()}}, {"async_op", c.async}}, {output});
  return c.finish(output, async_op);
}

std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input, const std::string& op,
                                     const std::shared_ptr<ProcessGroup>& group, bool async_op) {
  const Call c(group, async_op, output, input);
  call_op("ReduceScatter", {autograd::detach(input)},
          {{"op", op}, {"group", int64_t{c.group->id()}}, {"async_op", c.async}}, {output});
  return c.finish(output, async_op);
}

void barrier(const std::shared_ptr<ProcessGroup>& group) {
  const int64_t id = group_of(group)->id();
  const Tensor token = call_op("Barrier", {}, {{"group", id}})[0];
  if (!is_tracing()) token.data_ptr();  // the barrier has passed once its token is written
}

}  // namespace kiln::distributed
