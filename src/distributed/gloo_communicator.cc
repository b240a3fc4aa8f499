// The Gloo communicator: Gloo's new-style collectives over a full mesh of TCP pairs. Consecutive
// collectives get consecutive tags (every member runs the group's collectives in one order).
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>

#include <cstdint>

#include "distributed/communicator.h"
#include "distributed/reduction.h"
#include "distributed/store.h"

namespace kiln::distributed {
namespace {

// Gloo's rendezvous reads and writes through its own Store interface.
class GlooStore final : public gloo::rendezvous::Store {
 public:
  explicit GlooStore(kiln::distributed::Store& store) : store_(store) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    store_.set(key, data);
  }
  std::vector<char> get(const std::string& key) override { return store_.get(key); }
  void wait(const std::vector<std::string>& keys) override { store_.wait(keys); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override {
    store_.wait(keys);  // the Kiln store applies its own timeout, the group's
  }

 private:
  kiln::distributed::Store& store_;
};

// Gloo sizes elements by the pointer type it is given; the reduce function knows the dtype.
template <typename Options>
void set_output(Options& opts, void* data, size_t count, size_t itemsize) {
  switch (itemsize) {
    case 1:
      return opts.setOutput(static_cast<uint8_t*>(data), count);
    case 2:
      return opts.setOutput(static_cast<uint16_t*>(data), count);
    case 4:
      return opts.setOutput(static_cast<uint32_t*>(data), count);
    default:
      return opts.setOutput(static_cast<uint64_t*>(data), count);
  }
}

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(std::shared_ptr<gloo::Context> context, std::chrono::milliseconds timeout)
      : context_(std::move(context)), timeout_(timeout) {}

  void all_reduce(void* data, size_t count, DType dtype, ReduceKind kind) override {
    gloo::AllreduceOptions opts(context_);
    set_output(opts, data, count, itemsize(dtype));
    opts.setReduceFunction([dtype, kind](void* c, const void* a, const void* b, size_t n) {
      reduce_elements(dtype, kind, a, b, c, n);
    });
    run(opts, [](gloo::AllreduceOptions& o) { gloo::allreduce(o); });
  }

  void broadcast(void* data, size_t bytes, int root) override {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<uint8_t*>(data), bytes);
    opts.setRoot(root);
    run(opts, [](gloo::BroadcastOptions& o) { gloo::broadcast(o); });
  }

  void all_gather(const void* in, void* out, size_t bytes) override {
    gloo::AllgatherOptions opts(context_);
    opts.setInput(const_cast<uint8_t*>(static_cast<const uint8_t*>(in)), bytes);
    opts.setOutput(static_cast<uint8_t*>(out), bytes * context_->size);
    run(opts, [](gloo::AllgatherOptions& o) { gloo::allgather(o); });
  }

  void barrier() override {
    gloo::BarrierOptions opts(context_);
    run(opts, [](gloo::BarrierOptions& o) { gloo::barrier(o); });
  }

 private:
  template <typename Options, typename Collective>
  void run(Options& opts, Collective collective) {
    opts.setTag(next_tag_++);
    opts.setTimeout(timeout_);
    collective(opts);
  }

  std::shared_ptr<gloo::Context> context_;
  std::chrono::milliseconds timeout_;
  uint32_t next_tag_ = 0;
};

void ignore_signal(int) {}

// Gloo writes to its sockets with writev, which raises SIGPIPE when the peer has gone; SIGPIPE's
// default action ends the process, so a dead peer would kill every rank that next writes to it
// instead of failing their collective with a kDistributed error. Python ignores SIGPIPE itself; a
// C++ program usually does not. Where the disposition is still the default, a handler that does
// nothing takes its place: the write then fails with EPIPE, which Gloo reports. A handler rather
// than SIG_IGN, because an ignored signal stays ignored in programs this process execs, while a
// caught one returns to the default there. A disposition the program chose is left alone; the
// handler stays for the life of the process (a write to a closed pipe then fails with EPIPE).
void keep_sigpipe_from_ending_the_process() {
  struct sigaction current = {};
  if (sigaction(SIGPIPE, nullptr, &current) != 0 || (current.sa_flags & SA_SIGINFO) != 0 ||
      current.sa_handler != SIG_DFL) {
    return;
  }
  struct sigaction nothing = {};
  nothing.sa_handler = ignore_signal;
  nothing.sa_flags = SA_RESTART;
  sigemptyset(&nothing.sa_mask);
  sigaction(SIGPIPE, &nothing, nullptr);
}

}  // namespace

std::unique_ptr<Communicator> connect_gloo(int rank, int size, std::chrono::milliseconds timeout,
                                           Store& store, const std::string& hostname) {
  keep_sigpipe_from_ending_the_process();
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->setTimeout(timeout);
  gloo::transport::tcp::attr attr;
  attr.hostname = hostname;
  std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
  GlooStore gloo_store(store);
  context->connectFullMesh(gloo_store, device);
  return std::make_unique<GlooCommunicator>(std::move(context), timeout);
}

}  // namespace kiln::distributed
