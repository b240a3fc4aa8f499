// The second source of the two-source test extension (see good_extension_a.cc).
#include <kiln/extension.h>

namespace {

int64_t answer() { return 42; }
void nothing() {}

}  // namespace

KILN_EXTENSION(m) { m.def("answer", +[]() { return kiln::Tensor::scalar(answer()); }); }
KILN_EXTENSION(m) { m.def("nothing", &nothing); }
