// The MPI entry points of a Kiln built without MPI (CMake found none): backend="mpi" is a clear
// error naming what to install. Compiled instead of mpi_communicator.cc.
#include <cstdlib>

#include "distributed/communicator.h"
#include "kiln/error.h"

namespace kiln::distributed {
namespace {

[[noreturn]] void unavailable() {
  KILN_FAIL(kDistributed) << "init_process_group: backend 'mpi' is not built into this Kiln (CMake "
                             "found no MPI: install OpenMPI, Debian libopenmpi-dev, and rebuild); "
                             "use backend='gloo'";
  std::abort();
}

}  // namespace

bool mpi_built() { return false; }
std::pair<int, int> mpi_start() { unavailable(); }
std::unique_ptr<Communicator> connect_mpi(const std::vector<int>&, int, std::chrono::milliseconds) {
  unavailable();
}

}  // namespace kiln::distributed
