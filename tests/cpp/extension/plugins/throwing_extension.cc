// An extension whose KILN_EXTENSION block throws: the loader must report it as a kiln::Error of
// the same kind, and nothing may cross the C entry point as an exception.
#include <kiln/extension.h>

KILN_EXTENSION(m) {
  (void)m;
  KILN_FAIL(kValue) << "fixture: this block refuses to load";
}
