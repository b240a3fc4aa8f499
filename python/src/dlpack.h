// DLPack exchange for kiln.Tensor, in both directions, without copying.
//
//   y = numpy.from_dlpack(x)        # x.__dlpack__(): y views x's memory
//   x = kiln.from_dlpack(torch_t)   # any object with __dlpack__: x views its memory
#pragma once

#include <nanobind/nanobind.h>

namespace kiln::py {

/// Adds __dlpack__ and __dlpack_device__ to kiln.Tensor (which must be bound already) and
/// from_dlpack(obj) to `m`.
void bind_dlpack(nanobind::module_& m);

}  // namespace kiln::py
