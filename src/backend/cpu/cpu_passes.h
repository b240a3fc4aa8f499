// kiln_cpu's built-in passes (private to libkiln). They run in the jit pipeline for backend
// "kiln_cpu" at jit_level "O1" and above (built-in passes are skipped at "O0"), in the stages
// after the frontend ones:
//   pre_fusion   MatmulEpilogueFusion   matmul / linear + bias + activation -> FusedMatMul
//   fusion       ElementwiseFusion      float elementwise trees (+ last-dim softmax) ->
//                                       FusedElementwise
//   post_fusion  PostFusionDeadCodeElimination   what fusion passes (a plugin's too) left unused
// The epilogue fusion goes first so that a bias and an activation end up in oneDNN's post-ops
// rather than in an elementwise group. They run after the passes registered in their stage with
// the default priority (0), so that a user's pattern sees the graph before kiln_cpu fuses it.
#pragma once

#include "kiln/pass.h"

namespace kiln::cpu {

inline constexpr const char* kMatmulEpilogueFusionName = "MatmulEpilogueFusion";
inline constexpr const char* kElementwiseFusionName = "ElementwiseFusion";
inline constexpr const char* kPostFusionDeadCodeEliminationName = "PostFusionDeadCodeElimination";

inline constexpr int kCpuPassPriority = 100;

PassPtr make_matmul_epilogue_fusion();
PassPtr make_elementwise_fusion();

}  // namespace kiln::cpu
