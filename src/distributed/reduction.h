// Element-wise reductions for the communicators: how Gloo (its reduce function) and MPI (its
// user-defined ops, for the 16-bit floats it lacks) combine two ranks' chunks. Private to Kiln.
#pragma once

#include <cstddef>

#include "distributed/communicator.h"

namespace kiln::distributed {

/// out[i] = a[i] (kind) b[i] for n elements of `dtype`; out may alias a or b. 16-bit floats are
/// combined in float and rounded once; bool sums are ORs, products ANDs. kind is never kAvg.
void reduce_elements(DType dtype, ReduceKind kind, const void* a, const void* b, void* out,
                     size_t n);
/// data[i] *= factor for n elements of a floating `dtype` (an average's division).
void scale_elements(DType dtype, void* data, size_t n, double factor);

}  // namespace kiln::distributed
