// Registers kiln_cpu's built-in passes (see cpu_passes.h) when the pass registry is first used.
#include "backend/cpu/cpu_passes.h"

#include "pass/builtin/builtin_passes.h"

namespace kiln::cpu {
namespace {

void register_cpu_passes(PassRegistry& registry) {
  const auto add = [&](PassPtr pass, PassStage stage) {
    PassInfo info;
    info.name = pass->name();
    info.backend = "kiln_cpu";
    info.stage = stage;
    info.priority = kCpuPassPriority;
    info.builtin = true;
    registry.add(std::move(pass), std::move(info));
  };
  add(make_matmul_epilogue_fusion(), PassStage::kPreFusion);
  add(make_elementwise_fusion(), PassStage::kFusion);
  add(pass::make_dead_code_elimination(kPostFusionDeadCodeEliminationName),
      PassStage::kPostFusion);
}

const pass::BuiltinPassSetRegistrar registrar(&register_cpu_passes);

}  // namespace
}  // namespace kiln::cpu
