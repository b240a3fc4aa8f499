// copy_into: the strided, converting copy behind contiguous(), clone(), casts and assignment.
#include <cstring>

#include "core/dtype_dispatch.h"
#include "core/strided_loop.h"
#include "kiln/tensor.h"

namespace kiln {
namespace {

template <typename To, typename From>
void copy_run(char* const* ptrs, const int64_t* strides, int64_t n) {
  char* out = ptrs[0];
  const char* in = ptrs[1];
  if (strides[0] == sizeof(To) && strides[1] == sizeof(From)) {
    To* o = reinterpret_cast<To*>(out);
    const From* x = reinterpret_cast<const From*>(in);
    for (int64_t i = 0; i < n; ++i) o[i] = convert<To>(x[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    From v;
    std::memcpy(&v, in + i * strides[1], sizeof(From));
    const To o = convert<To>(v);
    std::memcpy(out + i * strides[0], &o, sizeof(To));
  }
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  const Tensor source = src.shape() == dst.shape() ? src : src.expand(dst.shape());
  if (dst.numel() == 0) return;
  if (dst.is_same(source)) return;
  dst.storage()->note_write();
  if (dst.dtype() == source.dtype() && dst.is_contiguous() && source.is_contiguous()) {
    char* out = static_cast<char*>(dst.data_ptr());
    const char* in = static_cast<const char*>(source.data_ptr());
    if (out == in) return;
    const int64_t bytes = static_cast<int64_t>(dst.nbytes());
    parallel_for(0, bytes, int64_t{1} << 20, [&](int64_t lo, int64_t hi) {
      std::memcpy(out + lo, in + lo, static_cast<size_t>(hi - lo));
    });
    return;
  }
  StridedLoop<2> loop(dst.shape(), {&dst, &source});
  visit_dtype(dst.dtype(), [&](auto to_tag) {
    using To = typename decltype(to_tag)::type;
    visit_dtype(source.dtype(), [&](auto from_tag) {
      using From = typename decltype(from_tag)::type;
      loop.parallel_run(kElementwiseGrain, copy_run<To, From>);
    });
  });
}

}  // namespace kiln
