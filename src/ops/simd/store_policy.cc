// store_for_output: when a row kernel should write with streaming stores (see float_kernels.h and
// Note [streaming stores] in simd_loops-inl.h).
#include <unistd.h>

#include <cstdint>

#include "ops/simd/float_kernels.h"

namespace kiln::simd {
namespace {

// Assumed where the L3 size is unknown (sysconf gives 0 or -1): well above any L2.
constexpr int64_t kDefaultLastLevelCache = int64_t{64} << 20;

int64_t last_level_cache_bytes() {
#ifdef _SC_LEVEL3_CACHE_SIZE
  const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (l3 > 0) return l3;
#endif
  return kDefaultLastLevelCache;
}

}  // namespace

Store store_for_output(int64_t bytes) {
  static const int64_t threshold = last_level_cache_bytes() / 2;
  return bytes > threshold ? Store::kStream : Store::kCached;
}

}  // namespace kiln::simd
