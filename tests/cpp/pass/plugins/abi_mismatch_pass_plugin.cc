// A pass plugin "built against another Kiln": its entry point stamps KILN_ABI_VERSION + 1.
#include <kiln/abi.h>

namespace {
int init(void*, KilnPluginReportFn, void*) { return 0; }
const KilnPluginEntry kEntry{KILN_ABI_VERSION + 1, "pass", &init};
}  // namespace

KILN_PLUGIN_EXPORT const KilnPluginEntry* kiln_plugin_pass_entry() { return &kEntry; }
