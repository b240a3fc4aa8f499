// Distributed training: process groups over Gloo, and collectives that are ops.
//
//   kiln::distributed::InitOptions opts;
//   opts.init_method = "tcp://10.0.0.1:29500";  // or "env://" (the default), "file:///shared/dir"
//   opts.rank = rank;
//   opts.world_size = 4;
//   kiln::distributed::init_process_group(opts);
//   kiln::Tensor g = ...;
//   kiln::distributed::all_reduce(g);                         // in place, through the pipeline
//   auto work = kiln::distributed::all_reduce(g, "sum", nullptr, /*async_op=*/true);
//   ...                                                       // compute overlaps the transfer
//   work->wait();                                             // g now holds the sum
//
// The collective engine is Gloo (the CPU engine PyTorch uses) over TCP; Kiln adds the rendezvous
// (a key-value store: TCP on rank 0's address, a shared directory, or in-process for tests), the
// group bookkeeping, timeouts and error reporting. The collectives are registered ops — AllReduce,
// Broadcast, AllGather, ReduceScatter and Barrier — with an int attribute `group` (a group's id()),
// so they run through the eager pipeline in program order, are traced by `kiln::jit` into graphs
// like any op, and differentiate (AllReduce-sum's gradient is the AllReduce of the gradient; see
// docs/architecture.md, "Distributed").
//
// Order: every rank of a group must issue the group's collectives in the same order. Kiln runs a
// group's collectives one at a time on the group's own thread, in the order the pipeline launches
// them, which is the order one caller thread issued them.
//
// Failures: every blocking step — rendezvous, each collective, wait() — gives up after the group's
// timeout (InitOptions::timeout_s; else the environment's KILN_DIST_TIMEOUT; else 300 s) and
// throws ErrorKind::kDistributed naming the op, the group, this rank and the cause (a peer that
// closed its connection is reported at once; a peer that stalls, at the timeout). After a failed
// collective the group is broken: later collectives on it fail at once with the first cause.
// A write to a peer that has gone raises SIGPIPE, whose default action would end this process
// instead: where SIGPIPE still has its default action, connecting a Gloo group installs a handler
// that does nothing (the write then fails, and the collective with it), for the life of the
// process. A disposition the program set itself, such as Python's SIG_IGN, is kept.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/tensor.h"

namespace kiln::distributed {

struct InitOptions {
  /// "gloo", or "mpi" (when is_mpi_available(): the processes are started by mpirun, which
  /// decides rank and world size; init_method does not apply).
  std::string backend = "gloo";
  /// "env://" (MASTER_ADDR, MASTER_PORT and, where rank/world_size are unset, RANK and WORLD_SIZE
  /// from the environment), "tcp://host:port" (rank 0 serves the rendezvous there) or
  /// "file:///path/to/dir" (a directory every rank can reach; created if missing).
  std::string init_method = "env://";
  int rank = -1;        // -1: from the environment's RANK
  int world_size = -1;  // -1: from the environment's WORLD_SIZE
  /// Seconds every blocking call waits at most; <= 0 means KILN_DIST_TIMEOUT, else 300.
  double timeout_s = 0;
};

/// An async collective's handle. wait() blocks until the collective has finished (its tensor
/// holds the result) and rethrows its failure; it is safe to call more than once.
class KILN_API Work {
 public:
  virtual ~Work();
  virtual void wait() = 0;
};

/// A set of ranks that run collectives together. The world group is id 0; new_group() makes more.
class KILN_API ProcessGroup {
 public:
  virtual ~ProcessGroup();
  /// The id collective ops name in their `group` attribute.
  virtual int id() const = 0;
  /// This process's rank in the group, or -1 when it is not a member.
  virtual int rank() const = 0;
  virtual int size() const = 0;
  /// The global (world) ranks of the members, in group-rank order.
  virtual const std::vector<int>& ranks() const = 0;
  virtual std::chrono::milliseconds timeout() const = 0;
  virtual const std::string& backend() const = 0;
};

/// Joins the world group; throws kDistributed when already initialized, on a bad init_method,
/// a rank outside [0, world_size), ranks that disagree on world_size, or a rendezvous that does not
/// complete within the timeout (naming the ranks that never arrived).
KILN_API void init_process_group(const InitOptions& options = {});
/// Leaves every group (waits for their queued collectives first); init_process_group may follow.
KILN_API void destroy_process_group();
KILN_API bool is_initialized();
/// True when this Kiln was built with MPI (backend "mpi"); Gloo is always there.
KILN_API bool is_mpi_available();
/// The world group; throws kDistributed when not initialized.
KILN_API std::shared_ptr<ProcessGroup> world();
/// The group with this id; throws kDistributed naming the known ids.
KILN_API std::shared_ptr<ProcessGroup> group_by_id(int id);
KILN_API int get_rank();
KILN_API int get_world_size();
/// A group of the given world ranks (distinct, in range). Every rank of the world must call it, in
/// the same order, even those not in `ranks` (they get a group whose rank() is -1).
KILN_API std::shared_ptr<ProcessGroup> new_group(const std::vector<int>& ranks);

// Collectives. `group` null means the world. Each is an op call (AllReduce, ...) through the eager
// pipeline; with async_op the call returns a Work at once and the transfer overlaps later ops —
// until wait(), the tensor must not be read or written. Without async_op they return null, and
// the result is ready (in program order) like any op's. Where a transfer cannot overlap (inside a
// traced function, or an output the kernel does not write directly: strided or of another dtype)
// an async_op call blocks like the others and returns a Work that has finished.

/// Reduces `tensor` across the group in place. op: "sum", "prod", "min", "max" or "avg".
KILN_API std::shared_ptr<Work> all_reduce(Tensor& tensor, const std::string& op = "sum",
                                          const std::shared_ptr<ProcessGroup>& group = nullptr,
                                          bool async_op = false);
/// Copies rank `src`'s tensor (a world rank) into every member's `tensor`, in place.
KILN_API std::shared_ptr<Work> broadcast(Tensor& tensor, int src,
                                         const std::shared_ptr<ProcessGroup>& group = nullptr,
                                         bool async_op = false);
/// Writes every member's `input` into `output`, stacked along dim 0 in group-rank order: output's
/// shape is input's with dim 0 multiplied by the group's size.
KILN_API std::shared_ptr<Work> all_gather(Tensor& output, const Tensor& input,
                                          const std::shared_ptr<ProcessGroup>& group = nullptr,
                                          bool async_op = false);
/// Reduces `input` across the group and writes this member's slice of dim 0 (input's dim 0
/// divided by the group's size) into `output`.
KILN_API std::shared_ptr<Work> reduce_scatter(Tensor& output, const Tensor& input,
                                              const std::string& op = "sum",
                                              const std::shared_ptr<ProcessGroup>& group = nullptr,
                                              bool async_op = false);
/// Returns when every member has reached it (waits for the op, unlike the others).
KILN_API void barrier(const std::shared_ptr<ProcessGroup>& group = nullptr);

}  // namespace kiln::distributed
