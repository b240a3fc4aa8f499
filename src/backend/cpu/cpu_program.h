// A graph compiled for kiln_cpu (private to libkiln): kernel selection, the memory plan and the
// schedule that cpu_backend.cc's executor runs.
//
//   std::shared_ptr<const kiln::cpu::CpuProgram> p = kiln::cpu::compile(graph);
//   // p->steps in order; each reads and writes value ids; p->values say where each lives
//
// Kernel selection: a FusedElementwise node runs the tile interpreter on its parsed program; a view
// op (kTraitView with a view function) makes a view of its input at run time, no copy, when its
// view function gives one for the layouts known at Build (graph inputs contiguous; else the step
// copies into planned memory); a float32 Linear, MatMul or FusedMatMul by a constant 2-d weight
// runs a PackedMatmul (its weight reordered once, here); every other op calls its CPU kernel
// directly with outputs already placed (no dispatch, no inference, no allocation per node). Memory: every value a step writes lives in one arena per run at an
// offset fixed here (memory_planner.h), except the graph's outputs and the values they view,
// which are allocated per run because they outlive it. An elementwise step may write over an
// input of its own shape and dtype that dies there (in place), when nothing views that input.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/cpu/packed_matmul.h"
#include "kiln/backend.h"
#include "ops/fused_elementwise.h"

namespace kiln::cpu {

/// Where a value's tensor comes from at run time.
enum class Home : uint8_t {
  kInput,     // a graph parameter
  kConstant,  // a constant of the graph
  kArena,     // the run's arena, at `offset`
  kOwn,       // its own allocation per run (an output, or viewed by one)
  kView,      // made by a view step from another value
};

struct Value {
  TensorMeta meta;
  Home home = Home::kArena;
  size_t offset = 0;  // kArena
};

enum class StepKind : uint8_t { kKernel, kFused, kView, kPackedMatmul };

struct Step {
  StepKind kind = StepKind::kKernel;
  OpDefPtr op;
  Attrs attrs;  // normalized
  const KernelFn* kernel = nullptr;
  std::vector<uint32_t> inputs;   // value ids
  std::vector<uint32_t> outputs;  // value ids
  fused::Program program;         // kFused
  std::shared_ptr<const PackedMatmul> matmul;  // kPackedMatmul
  size_t workspace_bytes = 0;
  size_t workspace_offset = 0;  // in the arena
};

struct CpuProgram {
  std::string name;
  std::vector<TensorMeta> parameters;
  std::vector<std::string> parameter_names;
  std::vector<uint32_t> parameter_values;
  std::vector<std::pair<uint32_t, Tensor>> constants;
  std::vector<Value> values;
  std::vector<Step> steps;
  std::vector<uint32_t> outputs;
  std::vector<OpDefPtr> ops;  // for check_ops_current
  uint64_t registry_generation = 0;
  BackendMemoryPlan memory;
};

/// Compiles a verified graph. Throws kNotImplemented naming a node whose op has no CPU kernel.
std::shared_ptr<const CpuProgram> compile(const FuncGraph& graph);

}  // namespace kiln::cpu
