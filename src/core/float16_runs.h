// Contiguous runs converted between float and the 16-bit floats (private to Kiln).
//
//   widen_run(half_data, floats, n);     // floats[i] = float(half_data[i])
//   narrow_run(floats, half_data, n);    // half_data[i] = Half(floats[i]), nearest even
//
// Casts, copies and the elementwise kernels on float16 / bfloat16 convert through these (see
// convert_contiguous in core/dtype_dispatch.h). float16 runs use x86's F16C instructions where the
// CPU has them; bfloat16 runs are compiled per instruction set (KILN_TARGET_CLONES). Every path
// gives the same bits as Half's and BFloat16's own conversions (kiln/dtype.h).
#pragma once

#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/export.h"

namespace kiln {

// Exported for the tests only.
KILN_API void widen_run(const Half* x, float* y, int64_t n);
KILN_API void widen_run(const BFloat16* x, float* y, int64_t n);
KILN_API void narrow_run(const float* x, Half* y, int64_t n);
KILN_API void narrow_run(const float* x, BFloat16* y, int64_t n);

}  // namespace kiln
