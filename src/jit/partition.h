// Partitioning: splits a graph between a backend and a fallback backend by the backend's
// Supports(node) (private to libkiln and the tests).
//
//   std::vector<GraphPart> parts = kiln::jit_detail::partition(graph, "my_backend", supports,
//                                                              "kiln_cpu");
//   // parts[k].graph runs on parts[k].backend, after the parts its inputs come from
//
// See Note [Partitioning] in partition.cc.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "kiln/export.h"
#include "kiln/ir.h"

namespace kiln::jit_detail {

/// One piece of a partitioned graph: a graph of its own for one backend.
struct GraphPart {
  std::string backend;
  FuncGraphPtr graph;
  /// For each parameter of `graph`, the node of the whole graph whose value it takes (a parameter
  /// of the whole graph, or an output of an earlier part).
  std::vector<NodePtr> inputs;
  /// For each output of `graph`, the node of the whole graph whose value it is.
  std::vector<NodePtr> outputs;
};

/// Splits `graph` into parts that run on `backend` (the CNodes `supports` accepts) and on
/// `fallback` (the others), in an order in which every part comes after the parts it reads from.
/// Each part is a new graph named "<name>.part<k>" that shares no node or primitive with `graph`;
/// constants are copied into the parts that use them. When `supports` accepts every node, the
/// result is one part holding `graph` itself. Built-in primitives (TupleGetItem) follow the node
/// they take apart. Exceptions from `supports` propagate.
KILN_API std::vector<GraphPart> partition(const FuncGraphPtr& graph, const std::string& backend,
                                          const std::function<bool(const CNodePtr&)>& supports,
                                          const std::string& fallback);

}  // namespace kiln::jit_detail
