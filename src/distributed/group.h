// Group: the ProcessGroup behind kiln/distributed.h — a communicator over the members (Gloo's or
// MPI's, distributed/communicator.h) and the thread that runs the group's collectives one at a
// time. Private to Kiln.
//
//   std::shared_ptr<Group> g = group_of(attrs.get<int64_t>("group"));
//   uint64_t seq = g->enqueue("AllReduce", [=](Communicator& c) { c.all_reduce(...); });
//   g->wait_for(seq);                    // rethrows the collective's failure as kDistributed
//
// Why a thread per group: an async collective must make progress while the caller computes, and
// Gloo and MPI want one collective at a time per communicator, issued in the same order on every
// rank. The pipeline launches a caller's ops in program order, so queueing at launch keeps that
// order.
//
// After a collective fails (a peer closed its connection, or the timeout passed) the group is
// broken — Gloo's pairs are in an unknown state — and every later collective fails at once with
// the first failure's message.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kiln/distributed.h"

namespace kiln::distributed {

class Communicator;
using CollectiveFn = std::function<void(Communicator&)>;

/// What a collective throws when the members called different collectives, or one on tensors of
/// other sizes or dtypes (Note [Ranks agree on each collective] in collective_ops.cc): no peer
/// failed, so the group's failure message says so instead of blaming one.
class RanksDisagree : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Group final : public ProcessGroup {
 public:
  /// Member `rank` of the world ranks `ranks` over `communicator`; a non-member has rank -1 and
  /// no communicator.
  Group(int id, int rank, std::vector<int> ranks, std::chrono::milliseconds timeout,
        std::string backend, std::unique_ptr<Communicator> communicator);
  ~Group() override;

  int id() const override { return id_; }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  const std::vector<int>& ranks() const override { return ranks_; }
  std::chrono::milliseconds timeout() const override { return timeout_; }
  const std::string& backend() const override { return backend_; }

  /// The group rank of world rank `world_rank`; throws kValue when it is not a member.
  int rank_of(int64_t world_rank) const;

  /// Queues `fn` behind the group's earlier collectives and returns its sequence number. `what`
  /// names it in errors ("AllReduce(float32[1024])"). Throws kDistributed for a non-member.
  uint64_t enqueue(std::string what, CollectiveFn fn);
  /// Runs `fn` and rethrows its failure: on the calling thread when no collective is queued or
  /// running (a hand-off to the group's thread and back costs two thread wake-ups, tens of
  /// microseconds each, which dominate small collectives), else after the queued ones.
  void run(std::string what, CollectiveFn fn);
  /// Waits until collective `seq` has run; rethrows its failure.
  void wait_for(uint64_t seq);
  bool has_completed(uint64_t seq);
  /// Waits for every queued collective, raising nothing (destroy_process_group).
  void drain();

  /// The async collective most recently queued that writes `storage`, and its sequence number
  /// (0 when none): how a Work made before the pipeline launched its op finds the collective.
  void note_async_write(const void* storage, uint64_t seq);
  uint64_t last_async_write(const void* storage);

  /// "group 0 (rank 1 of 2)": how errors name the group.
  std::string describe() const;

 private:
  struct Job {
    uint64_t seq;
    std::string what;
    CollectiveFn fn;
  };
  void check_member(const std::string& what) const;
  /// Runs `job` (the caller holds `lock`, which is released while it runs) and records how it
  /// ended. Jobs run one at a time: `running_` keeps the worker and run() apart.
  void execute(Job& job, std::unique_lock<std::mutex>& lock);
  void run_jobs();

  const int id_;
  const int rank_;
  const std::vector<int> ranks_;
  const std::chrono::milliseconds timeout_;
  const std::string backend_;
  std::unique_ptr<Communicator> communicator_;

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Job> queue_;
  uint64_t next_seq_ = 1;
  uint32_t next_tag_ = 0;  // Gloo's tag of the next collective
  bool running_ = false;
  uint64_t completed_ = 0;   // every job with seq <= completed_ has run
  uint64_t failed_seq_ = 0;  // the first job that failed (0: none)
  std::string failure_;      // its message
  std::map<const void*, uint64_t> async_writes_;
  bool stopping_ = false;
  std::thread worker_;
};

/// The group with this id (the `group` attribute of collective ops); throws kDistributed.
std::shared_ptr<Group> group_of(int64_t id);
/// The group a caller passed (null: the world); throws kDistributed for a group that
/// destroy_process_group() ended, even if a later group reuses its id.
std::shared_ptr<Group> group_of(const std::shared_ptr<ProcessGroup>& requested);

}  // namespace kiln::distributed
