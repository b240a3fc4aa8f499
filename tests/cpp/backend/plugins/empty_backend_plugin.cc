// A library with a backend plugin's entry point whose init registers no backend.
#include <kiln/abi.h>

namespace {
int init(void*, KilnPluginReportFn, void*) { return 0; }
const KilnPluginEntry kEntry{KILN_ABI_VERSION, "backend", &init};
}  // namespace

KILN_PLUGIN_EXPORT const KilnPluginEntry* kiln_plugin_backend_entry() { return &kEntry; }
