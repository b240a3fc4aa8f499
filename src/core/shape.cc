#include <algorithm>
#include <limits>
#include <sstream>

#include "kiln/error.h"
#include "kiln/tensor.h"

namespace kiln {

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    os << (i ? ", " : "") << shape[i];
  }
  os << "]";
  return os.str();
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

size_t checked_nbytes(const Shape& shape, DType dtype, const char* what) {
  for (int64_t s : shape) {
    KILN_CHECK_SHAPE(s >= 0) << what << ": sizes must be non-negative, got " << shape_str(shape);
  }
  int64_t bytes = static_cast<int64_t>(itemsize(dtype));
  bool overflow = false;
  for (int64_t s : shape) {
    if (s == 0) return 0;  // (a zero anywhere: no bytes, however large the other sizes)
    overflow = overflow || __builtin_mul_overflow(bytes, s, &bytes);
  }
  KILN_CHECK_SHAPE(!overflow) << what << ": a " << dtype_name(dtype) << " tensor of shape "
                              << shape_str(shape) << " would take more than 2^63 - 1 bytes";
  return static_cast<size_t>(bytes);
}

int64_t view_extent(const Shape& shape, const Shape& strides, int64_t offset) {
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t extent = offset + 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t step = 0;
    if (__builtin_mul_overflow(shape[d] - 1, strides[d], &step) ||
        __builtin_add_overflow(extent, step, &extent)) {
      return std::numeric_limits<int64_t>::max();
    }
  }
  return extent;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t running = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = running;
    running *= shape[i] > 0 ? shape[i] : 1;
  }
  return strides;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* what) {
  // A 0-d tensor accepts dim 0 and -1 where a reduction or unsqueeze treats it as rank 1.
  const int64_t bound = ndim > 0 ? ndim : 1;
  KILN_CHECK_INDEX(dim >= -bound && dim < bound)
      << what << " out of range: expected a value in [" << -bound << ", " << bound - 1
      << "] for a " << ndim << "-d tensor, got " << dim;
  return dim < 0 ? dim + bound : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    KILN_CHECK_SHAPE(da >= 0 && db >= 0) << "broadcast_shapes: sizes must be non-negative, got "
                                         << shape_str(a) << " and " << shape_str(b);
    KILN_CHECK_SHAPE(da == db || da == 1 || db == 1)
        << "shapes " << shape_str(a) << " and " << shape_str(b)
        << " do not broadcast: dimension " << i << " has sizes " << da << " and " << db
        << " (expected equal sizes or 1)";
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace kiln
