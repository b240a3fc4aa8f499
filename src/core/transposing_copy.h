// Whether a copy runs across layouts (private to libkiln): see Note [Transposing copies] in
// src/core/copy.cc.
//
//   if (is_transposing_copy(out, x)) x = x.contiguous();   // tiled, then read in one flat run
#pragma once

#include "kiln/tensor.h"

namespace kiln {

/// True when copy_into(dst, src) (src of dst's shape) goes in tiles: one of them runs along the
/// other's innermost dim while the other steps a cache line or more there, so that walking either
/// in the other's order would read or write a line per element.
bool is_transposing_copy(const Tensor& dst, const Tensor& src);

}  // namespace kiln
