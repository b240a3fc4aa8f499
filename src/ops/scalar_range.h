// The number a 0-d tensor holds, and whether a number fits an integer dtype: checked before a
// value is written into a tensor of that dtype (a fill, a pad, masked_fill, where, assignment),
// where PyTorch raises rather than wrap ("value cannot be converted to type uint8_t without
// overflow"), and before a double is converted to an integer type, which is undefined behaviour
// out of range.
#pragma once

#include <cstdint>

#include "kiln/dtype.h"
#include "kiln/export.h"
#include "kiln/scalar.h"
#include "kiln/tensor.h"

namespace kiln::detail {

/// The number a 0-d tensor with its data (a weak scalar, a materialized 0-d tensor) holds: bool,
/// int64 for the integer dtypes, double for the floating ones (float16 and bfloat16 exactly,
/// float64 as it is: through float, 0.1 would be 0.10000000149).
KILN_API Scalar scalar_value(const Tensor& t);

/// True when the integer `v` lies in the range of an integer `dtype`; always true for floating
/// dtypes and bool (which take any number).
KILN_API bool int_fits(DType dtype, int64_t v);
/// True when `v` is finite and lies in the range of an integer `dtype` (a fraction truncates, as a
/// cast does); always true for floating dtypes and bool.
KILN_API bool double_fits(DType dtype, double v);
/// int_fits or double_fits, by the scalar's kind.
KILN_API bool scalar_fits(DType dtype, const Scalar& value);

}  // namespace kiln::detail
