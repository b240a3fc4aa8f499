// Communicator: the collective engine under a Group (distributed/group.h) — Gloo's over TCP, or
// MPI's when Kiln is built with it. Private to Kiln.
//
//   std::unique_ptr<Communicator> c = connect_gloo(rank, size, timeout, store, hostname);
//   c->all_reduce(data, count, DType::kFloat32, ReduceKind::kSum);   // in place, every member
//
// A Group runs one collective at a time on its communicator (from its own thread or a caller's),
// so implementations need no locking of their own. Every call gives up after the communicator's
// timeout and throws (any std::exception; the Group turns it into kDistributed with the op's name).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "kiln/dtype.h"

namespace kiln::distributed {

class Store;

/// The reductions; kAvg is a sum the caller divides (Gloo and MPI have no average).
enum class ReduceKind { kSum, kProd, kMin, kMax, kAvg };
/// "sum", "prod", "min", "max", "avg"; throws kValue listing them.
ReduceKind reduce_kind(const std::string& name);

class Communicator {
 public:
  virtual ~Communicator() = default;
  /// data[i] = the reduction over the members of their data[i]; kind is never kAvg.
  virtual void all_reduce(void* data, size_t count, DType dtype, ReduceKind kind) = 0;
  /// Copies member `root`'s `bytes` bytes at data into every member's.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  /// out holds every member's `bytes` bytes of in, in member order.
  virtual void all_gather(const void* in, void* out, size_t bytes) = 0;
  virtual void barrier() = 0;
};

/// Connects member `rank` of `size` to the others through `store` (Gloo's full mesh over TCP,
/// listening on `hostname`).
std::unique_ptr<Communicator> connect_gloo(int rank, int size, std::chrono::milliseconds timeout,
                                           Store& store, const std::string& hostname);

/// True when this Kiln was built with MPI.
bool mpi_built();
/// Starts MPI (once per process; it stays up until exit) and returns (rank, size) of its world.
/// Throws kDistributed when Kiln was built without MPI or MPI lacks thread support.
std::pair<int, int> mpi_start();
/// A communicator over the MPI world ranks `ranks` (sorted), or null for a non-member. Every
/// world rank must call it, in the same order (it is collective over the world).
std::unique_ptr<Communicator> connect_mpi(const std::vector<int>& ranks, int world_rank,
                                          std::chrono::milliseconds timeout);

}  // namespace kiln::distributed
