// The MPI communicator (built when CMake finds MPI): MPI's collectives on a communicator split
// from MPI_COMM_WORLD. MPI has no timeouts, so each collective is started non-blocking and polled
// until it completes or the timeout passes (then it is abandoned and the group is broken).
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <mutex>
#include <sstream>
#include <thread>

#include "distributed/communicator.h"
#include "distributed/reduction.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

void check_mpi(int status, const char* what) {
  if (status == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(status, text, &length);
  KILN_FAIL(kDistributed) << what << " failed: " << text;
}

// MPI's reduction ops for the 16-bit floats, which MPI has no type for: user ops over uint16.
template <DType D, ReduceKind K>
void reduce_16bit(void* in, void* inout, int* length, MPI_Datatype*) {
  reduce_elements(D, K, in, inout, inout, static_cast<size_t>(*length));
}

template <DType D>
MPI_Op make_16bit_op(ReduceKind kind) {
  MPI_Op op = MPI_OP_NULL;
  MPI_User_function* fn = kind == ReduceKind::kProd  ? &reduce_16bit<D, ReduceKind::kProd>
                          : kind == ReduceKind::kMin ? &reduce_16bit<D, ReduceKind::kMin>
                          : kind == ReduceKind::kMax ? &reduce_16bit<D, ReduceKind::kMax>
                                                     : &reduce_16bit<D, ReduceKind::kSum>;
  check_mpi(MPI_Op_create(fn, /*commute=*/1, &op), "MPI_Op_create");
  return op;
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::kBool:
      return MPI_C_BOOL;
    case DType::kInt8:
      return MPI_INT8_T;
    case DType::kUInt8:
      return MPI_UINT8_T;
    case DType::kInt16:
      return MPI_INT16_T;
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
    case DType::kFloat16:
    case DType::kBFloat16:
      return MPI_UINT16_T;
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kFloat64:
      return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(DType dtype, ReduceKind kind) {
  if (dtype == DType::kFloat16 || dtype == DType::kBFloat16) {
    // Made once, after MPI_Init; kept until MPI_Finalize.
    static const MPI_Op half[4] = {make_16bit_op<DType::kFloat16>(ReduceKind::kSum),
                                   make_16bit_op<DType::kFloat16>(ReduceKind::kProd),
                                   make_16bit_op<DType::kFloat16>(ReduceKind::kMin),
                                   make_16bit_op<DType::kFloat16>(ReduceKind::kMax)};
    static const MPI_Op bf16[4] = {make_16bit_op<DType::kBFloat16>(ReduceKind::kSum),
                                   make_16bit_op<DType::kBFloat16>(ReduceKind::kProd),
                                   make_16bit_op<DType::kBFloat16>(ReduceKind::kMin),
                                   make_16bit_op<DType::kBFloat16>(ReduceKind::kMax)};
    return (dtype == DType::kFloat16 ? half : bf16)[static_cast<int>(kind)];
  }
  const bool logical = dtype == DType::kBool;
  switch (kind) {
    case ReduceKind::kProd:
      return logical ? MPI_LAND : MPI_PROD;
    case ReduceKind::kMin:
      return logical ? MPI_LAND : MPI_MIN;
    case ReduceKind::kMax:
      return logical ? MPI_LOR : MPI_MAX;
    case ReduceKind::kSum:
    case ReduceKind::kAvg:
      break;
  }
  return logical ? MPI_LOR : MPI_SUM;
}

int count_of(size_t n) {
  KILN_CHECK_DIST(n <= static_cast<size_t>(INT_MAX))
      << "MPI collectives take at most " << INT_MAX << " elements per call, got " << n;
  return static_cast<int>(n);
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(MPI_Comm comm, std::chrono::milliseconds timeout)
      : comm_(comm), timeout_(timeout) {}
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized && comm_ != MPI_COMM_WORLD) MPI_Comm_free(&comm_);
  }

  void all_reduce(void* data, size_t count, DType dtype, ReduceKind kind) override {
    MPI_Request request;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, data, count_of(count), mpi_type(dtype),
                             mpi_op(dtype, kind), comm_, &request),
              "MPI_Iallreduce");
    finish(request, "MPI_Iallreduce");
  }

  void broadcast(void* data, size_t bytes, int root) override {
    MPI_Request request;
    check_mpi(MPI_Ibcast(data, count_of(bytes), MPI_BYTE, root, comm_, &request), "MPI_Ibcast");
    finish(request, "MPI_Ibcast");
  }

  void all_gather(const void* in, void* out, size_t bytes) override {
    MPI_Request request;
    check_mpi(MPI_Iallgather(in, count_of(bytes), MPI_BYTE, out, count_of(bytes), MPI_BYTE, comm_,
                             &request),
              "MPI_Iallgather");
    finish(request, "MPI_Iallgather");
  }

  void barrier() override {
    MPI_Request request;
    check_mpi(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier");
    finish(request, "MPI_Ibarrier");
  }

 private:
  // Polls until the request completes. Open MPI advances a non-blocking collective only inside
  // MPI calls, so the first second polls back to back (yielding the core), as MPI's blocking
  // calls do; a collective still running after that is waiting for a stalled peer, and is
  // polled every millisecond until the timeout.
  void finish(MPI_Request& request, const char* what) {
    const auto start = std::chrono::steady_clock::now();
    for (;;) {
      int done = 0;
      check_mpi(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
      if (done) return;
      const auto waited = std::chrono::steady_clock::now() - start;
      KILN_CHECK_DIST(waited < timeout_) << what << " did not complete within the timeout";
      if (waited < std::chrono::seconds(1)) {
        std::this_thread::yield();
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }

  MPI_Comm comm_;
  std::chrono::milliseconds timeout_;
};

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

bool mpi_built() { return true; }

std::pair<int, int> mpi_start() {
  static std::once_flag once;
  std::call_once(once, [] {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;  // the embedding program started MPI itself
    int provided = 0;
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    std::atexit(&finalize_at_exit);
    // A group runs collectives from its own thread and from callers', and groups run at once.
    KILN_CHECK_DIST(provided == MPI_THREAD_MULTIPLE)
        << "the MPI library gives thread level " << provided << ", but Kiln needs "
        << "MPI_THREAD_MULTIPLE (" << MPI_THREAD_MULTIPLE << ")";
  });
  int rank = 0, size = 0;
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  return {rank, size};
}

std::unique_ptr<Communicator> connect_mpi(const std::vector<int>& ranks, int world_rank,
                                          std::chrono::milliseconds timeout) {
  int size = 0;
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size), "MPI_Comm_size");
  bool member = false;
  for (int r : ranks) member = member || r == world_rank;
  // Every world rank takes part in the split; members keep their world order (ranks is sorted).
  MPI_Comm comm = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split(MPI_COMM_WORLD, member ? 0 : MPI_UNDEFINED, world_rank, &comm),
            "MPI_Comm_split");
  if (!member) return nullptr;
  return std::make_unique<MpiCommunicator>(comm, timeout);
}

}  // namespace kiln::distributed
