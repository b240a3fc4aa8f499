// kiln._C.distributed: process groups and collectives (kiln/distributed.h). Every call that may
// wait for other ranks releases the GIL, so the process's other Python threads (and the hooks
// DataParallel runs during backward) keep going.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "kiln/distributed.h"
#include "kiln/op.h"

namespace kiln::py {
namespace nb = nanobind;
using namespace nb::literals;

namespace {

using distributed::ProcessGroup;
using distributed::Work;
using GroupPtr = std::shared_ptr<ProcessGroup>;
using Release = nb::call_guard<nb::gil_scoped_release>;

int64_t group_id(const GroupPtr& group) {
  if (group == nullptr) return 0;
  GroupPtr current;
  if (distributed::is_initialized()) {
    try {
      current = distributed::group_by_id(group->id());
    } catch (const Error&) {
      // not a group of this world: reported below
    }
  }
  KILN_CHECK_KIND(ErrorKind::kDistributed, current == group)
      << "process group " << group->id()
      << " was destroyed by destroy_process_group(); make a new one with new_group()";
  return group->id();
}

// The functional collectives: a new result, recorded for autograd like any op.
Tensor collective(const char* op, const Tensor& x, Attrs attrs, const GroupPtr& group) {
  attrs.set("group", group_id(group));
  return call_op(op, {x}, attrs)[0];
}

}  // namespace

void bind_distributed(nb::module_& m) {
  nb::module_ d = m.def_submodule("distributed", "Process groups and collectives");

  nb::class_<Work>(d, "Work", "An async collective; wait() completes it.")
      .def("wait", &Work::wait, Release(),
           "Blocks until the collective has finished; raises DistributedError if it failed.");

  nb::class_<ProcessGroup>(d, "ProcessGroup", "Ranks that run collectives together.")
      .def_prop_ro("id", &ProcessGroup::id)
      .def_prop_ro("rank", &ProcessGroup::rank, "This process's rank in the group (-1: no member).")
      .def_prop_ro("size", &ProcessGroup::size)
      .def_prop_ro("ranks", &ProcessGroup::ranks, "The members' world ranks, in group-rank order.")
      .def_prop_ro(
          "timeout", [](const ProcessGroup& g) { return g.timeout().count() / 1000.0; },
          "Seconds every blocking call waits at most.")
      .def_prop_ro("backend", &ProcessGroup::backend)
      .def("__repr__", [](const ProcessGroup& g) {
        return "<ProcessGroup " + std::to_string(g.id()) + " backend=" + g.backend() +
               " rank=" + std::to_string(g.rank()) + " size=" + std::to_string(g.size()) + ">";
      });

  d.def(
      "init_process_group",
      [](const std::string& backend, const std::string& init_method, int rank, int world_size,
         double timeout) {
        distributed::InitOptions options;
        options.backend = backend;
        options.init_method = init_method;
        options.rank = rank;
        options.world_size = world_size;
        options.timeout_s = timeout;
        distributed::init_process_group(options);
      },
      "backend"_a, "init_method"_a, "rank"_a, "world_size"_a, "timeout"_a, Release());
  d.def("destroy_process_group", &distributed::destroy_process_group, Release());
  d.def("is_initialized", &distributed::is_initialized);
  d.def("is_mpi_available", &distributed::is_mpi_available);
  d.def("world", &distributed::world);
  d.def("new_group", &distributed::new_group, "ranks"_a, Release());

  d.def("all_reduce", &distributed::all_reduce, "tensor"_a, "op"_a, "group"_a.none(), "async_op"_a,
        Release());
  d.def("broadcast", &distributed::broadcast, "tensor"_a, "src"_a, "group"_a.none(), "async_op"_a,
        Release());
  d.def("all_gather", &distributed::all_gather, "output"_a, "input"_a, "group"_a.none(),
        "async_op"_a, Release());
  d.def("reduce_scatter", &distributed::reduce_scatter, "output"_a, "input"_a, "op"_a,
        "group"_a.none(), "async_op"_a, Release());
  d.def("barrier", &distributed::barrier, "group"_a.none(), Release());

  nb::module_ f =
      d.def_submodule("functional", "Collectives that return new, differentiable tensors");
  f.def(
      "all_reduce",
      [](const Tensor& x, const std::string& op, const GroupPtr& group) {
        return collective("AllReduce", x, {{"op", op}}, group);
      },
      "x"_a, "op"_a, "group"_a.none(), Release());
  f.def(
      "broadcast",
      [](const Tensor& x, int src, const GroupPtr& group) {
        return collective("Broadcast", x, {{"src", int64_t{src}}}, group);
      },
      "x"_a, "src"_a, "group"_a.none(), Release());
  f.def(
      "all_gather",
      [](const Tensor& x, const GroupPtr& group) { return collective("AllGather", x, {}, group); },
      "x"_a, "group"_a.none(), Release());
  f.def(
      "reduce_scatter",
      [](const Tensor& x, const std::string& op, const GroupPtr& group) {
        return collective("ReduceScatter", x, {{"op", op}}, group);
      },
      "x"_a, "op"_a, "group"_a.none(), Release());
}

}  // namespace kiln::py
