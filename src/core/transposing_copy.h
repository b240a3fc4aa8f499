// Whether a loop reading one operand beside another would walk it badly (private to libkiln): see
// Notes [Transposing copies] and [Copies of short runs] in src/core/copy.cc.
//
//   if (is_transposing_copy(out, x)) x = x.contiguous();   // tiled, then read in one flat run
#pragma once

#include "kiln/tensor.h"

namespace kiln {

/// True when copy_into(dst, src) (src of dst's shape) goes in tiles: one of them runs along the
/// other's innermost dim while the other steps a cache line or more there, so that walking either
/// in the other's order would read or write a line per element.
bool is_transposing_copy(const Tensor& dst, const Tensor& src);

/// True when a loop over dst and src (src of dst's shape, with no broadcast dims) goes in runs of
/// at most `max_run` elements, contiguous in both: a copy of src then reads it in one flat run
/// after copying it in memcpy runs (Note [Copies of short runs]).
bool has_short_runs(const Tensor& dst, const Tensor& src, int64_t max_run);

}  // namespace kiln
