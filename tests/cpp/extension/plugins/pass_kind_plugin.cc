// A plugin of another kind ("pass") exported under the extension entry symbol.
#include <kiln/abi.h>

namespace {
int init(void*, KilnPluginReportFn, void*) { return 0; }
const KilnPluginEntry kEntry{KILN_ABI_VERSION, "pass", &init};
}  // namespace

KILN_PLUGIN_EXPORT const KilnPluginEntry* kiln_plugin_extension_entry() { return &kEntry; }
