#include "distributed/group.h"

#include <sstream>
#include <utility>

#include "distributed/communicator.h"
#include "kiln/error.h"
#include "runtime/parker.h"

namespace kiln::distributed {

Work::~Work() = default;
ProcessGroup::~ProcessGroup() = default;

namespace {

std::string seconds_str(std::chrono::milliseconds t) {
  std::ostringstream s;
  s << static_cast<double>(t.count()) / 1000.0 << " s";
  return s.str();
}

}  // namespace

Group::Group(int id, int rank, std::vector<int> ranks, std::chrono::milliseconds timeout,
             std::string backend, std::unique_ptr<Communicator> communicator)
    : id_(id),
      rank_(rank),
      ranks_(std::move(ranks)),
      timeout_(timeout),
      backend_(std::move(backend)),
      communicator_(std::move(communicator)) {
  if (rank_ >= 0) worker_ = std::thread([this] { run_jobs(); });
}

Group::~Group() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (worker_.joinable()) worker_.join();
}

std::string Group::describe() const {
  std::ostringstream s;
  s << "group " << id_;
  if (rank_ >= 0) {
    s << " (rank " << rank_ << " of " << size() << ")";
  } else {
    s << " (this process is not a member)";
  }
  return s.str();
}

int Group::rank_of(int64_t world_rank) const {
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (ranks_[i] == world_rank) return static_cast<int>(i);
  }
  std::ostringstream members;
  for (size_t i = 0; i < ranks_.size(); ++i) members << (i ? ", " : "") << ranks_[i];
  KILN_FAIL(kValue) << "rank " << world_rank << " is not a member of group " << id_
                    << " (its world ranks are [" << members.str() << "])";
  return -1;
}

void Group::check_member(const std::string& what) const {
  KILN_CHECK_DIST(rank_ >= 0) << what << ": this process is not a member of group " << id_
                              << "; only its ranks may run its collectives";
}

uint64_t Group::enqueue(std::string what, CollectiveFn fn) {
  check_member(what);
  uint64_t seq;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    seq = next_seq_++;
    queue_.push_back({seq, std::move(what), std::move(fn)});
  }
  changed_.notify_all();
  return seq;
}

void Group::run(std::string what, CollectiveFn fn) {
  check_member(what);
  std::unique_lock<std::mutex> lock(mutex_);
  if (running_ || !queue_.empty()) {
    lock.unlock();
    wait_for(enqueue(std::move(what), std::move(fn)));
    return;
  }
  Job job{next_seq_++, std::move(what), std::move(fn)};
  execute(job, lock);
  lock.unlock();
  wait_for(job.seq);
}

void Group::execute(Job& job, std::unique_lock<std::mutex>& lock) {
  running_ = true;
  const bool broken = failed_seq_ != 0;
  lock.unlock();
  std::string failure;
  if (!broken) {
    try {
      job.fn(*communicator_);
    } catch (const RanksDisagree& e) {
      failure = job.what + " on " + describe() + " failed: " + e.what();
    } catch (const std::exception& e) {
      failure = job.what + " on " + describe() + " failed: " + e.what() +
                " (a peer may have exited or stalled; the group's timeout is " +
                seconds_str(timeout_) + ")";
    } catch (...) {
      failure = job.what + " on " + describe() + " failed with an exception of unknown type";
    }
  }
  job.fn = nullptr;  // drops the tensors it holds before anyone is told it finished
  lock.lock();
  if (!failure.empty()) {
    failed_seq_ = job.seq;
    failure_ = std::move(failure);
  }
  completed_ = job.seq;
  running_ = false;
  changed_.notify_all();
}

void Group::run_jobs() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [&] { return stopping_ || (!queue_.empty() && !running_); });
    if (queue_.empty()) return;  // stopping, and every queued collective has run
    Job job = std::move(queue_.front());
    queue_.pop_front();
    execute(job, lock);
  }
}

void Group::wait_for(uint64_t seq) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (completed_ < seq) {
    // Sleeping gives up the GIL (the runtime's blocking hooks): the group's thread may drop the
    // last reference to a tensor whose memory Python owns, which takes the GIL.
    lock.unlock();
    const runtime::BlockingHooks& hooks = runtime::blocking_hooks();
    void* token = hooks.enter != nullptr ? hooks.enter() : nullptr;
    lock.lock();
    changed_.wait(lock, [&] { return completed_ >= seq; });
    lock.unlock();
    if (hooks.leave != nullptr) hooks.leave(token);
    lock.lock();
  }
  if (failed_seq_ == 0 || seq < failed_seq_) return;
  if (seq == failed_seq_) throw Error(ErrorKind::kDistributed, failure_);
  throw Error(ErrorKind::kDistributed, "a collective on " + describe() +
                                           " could not run: the group is broken since " + failure_);
}

bool Group::has_completed(uint64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_ >= seq;
}

void Group::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t last = next_seq_ - 1;
  changed_.wait(lock, [&] { return completed_ >= last; });
}

void Group::note_async_write(const void* storage, uint64_t seq) {
  std::lock_guard<std::mutex> lock(mutex_);
  async_writes_[storage] = seq;
  // Entries of collectives that finished well are dead weight (waiting for them returns at once);
  // failed ones stay, so that their Work still raises.
  for (auto it = async_writes_.begin(); it != async_writes_.end();) {
    const bool succeeded =
        it->second <= completed_ && (failed_seq_ == 0 || it->second < failed_seq_);
    it = succeeded ? async_writes_.erase(it) : std::next(it);
  }
}

uint64_t Group::last_async_write(const void* storage) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = async_writes_.find(storage);
  return it == async_writes_.end() ? 0 : it->second;
}

}  // namespace kiln::distributed
