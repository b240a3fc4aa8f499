// A backend plugin "built against another Kiln": its entry point stamps KILN_ABI_VERSION + 1.
#include <kiln/abi.h>

namespace {
int init(void*, KilnPluginReportFn, void*) { return 0; }
const KilnPluginEntry kEntry{KILN_ABI_VERSION + 1, "backend", &init};
}  // namespace

KILN_PLUGIN_EXPORT const KilnPluginEntry* kiln_plugin_backend_entry() { return &kEntry; }
