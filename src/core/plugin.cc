// The one plugin loader (see core/plugin.h).
#include "core/plugin.h"

#include <dlfcn.h>

#include <cstring>
#include <fstream>
#include <string>
#include <sys/stat.h>

#include "kiln/error.h"

namespace kiln {

// Note [Plugins stay loaded]
// A plugin that loaded successfully is never dlclose()d. Its code backs objects that outlive any
// handle we could count: op kernels held by OpDefs (which queued ops and graphs keep), vtables of
// passes and backends, Python function objects of an extension. Unloading it would leave those
// pointing at unmapped code. Loading a new build of the same plugin gives a new file name (the
// extension builder names each build by its content hash), so "reload" is "load the new one and
// let it replace the old one's registrations"; the old code stays mapped, unused. Only a library
// that failed a check (and whose init never ran) is closed again.

int abi_version() { return KILN_ABI_VERSION; }

namespace {

std::string abi_str(uint32_t version) {
  return std::to_string(version) + " (Kiln " + std::to_string(version / 1000) + "." +
         std::to_string(version % 1000) + ".x)";
}

bool has_elf_header(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  char magic[4] = {};
  file.read(magic, sizeof(magic));
  return file.gcount() == 4 && std::memcmp(magic, "\x7f" "ELF", 4) == 0;
}

// Closes a library that failed a check.
struct CloseOnFailure {
  void* handle;
  ~CloseOnFailure() {
    if (handle != nullptr) dlclose(handle);
  }
};

struct InitReport {
  bool reported = false;
  int kind = 0;
  std::string message;
};

void record_report(void* context, int kind, const char* message) {
  auto* report = static_cast<InitReport*>(context);
  report->reported = true;
  report->kind = kind;
  report->message = message != nullptr ? message : "";
}

}  // namespace

void PluginLibrary::init(void* host) const {
  InitReport report;
  const int status = entry_->init(host, &record_report, &report);
  if (status == 0) return;
  const int kind = report.kind >= 0 && report.kind <= static_cast<int>(ErrorKind::kDistributed)
                       ? report.kind
                       : static_cast<int>(ErrorKind::kGeneric);
  throw Error(static_cast<ErrorKind>(kind),
              std::string(entry_->kind) + " plugin " + path_ + " failed to initialise: " +
                  (report.reported ? report.message : "init returned an error without a reason"));
}

std::shared_ptr<const PluginLibrary> load_plugin(const std::string& path, const char* entry_symbol,
                                                 const char* kind) {
  const std::string what = std::string("cannot load ") + kind + " plugin " + path + ": ";
  struct stat info {};
  KILN_CHECK_VALUE(stat(path.c_str(), &info) == 0) << what << "no such file";
  KILN_CHECK_VALUE(S_ISREG(info.st_mode)) << what << "expected a file, got a directory or device";
  KILN_CHECK_VALUE(has_elf_header(path))
      << what << "not a shared library (expected an ELF file, the file starts otherwise)";

  dlerror();
  CloseOnFailure library{dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)};
  if (library.handle == nullptr) {
    const char* reason = dlerror();
    KILN_FAIL(kValue) << what << "dlopen failed: " << (reason != nullptr ? reason : "unknown");
  }
  auto entry_fn = reinterpret_cast<KilnPluginEntryFn>(dlsym(library.handle, entry_symbol));
  KILN_CHECK_VALUE(entry_fn != nullptr)
      << what << "it has no entry point " << entry_symbol << " (" << kind
      << " plugins export it through Kiln's registration macro)";
  const KilnPluginEntry* entry = entry_fn();
  KILN_CHECK_VALUE(entry != nullptr) << what << entry_symbol << " returned null";
  KILN_CHECK_VALUE(entry->abi_version == static_cast<uint32_t>(abi_version()))
      << what << "it was built against Kiln ABI version " << abi_str(entry->abi_version)
      << ", but this Kiln has ABI version " << abi_str(static_cast<uint32_t>(abi_version()))
      << "; rebuild the plugin against this Kiln";
  KILN_CHECK_VALUE(entry->kind != nullptr && std::strcmp(entry->kind, kind) == 0)
      << what << "expected a plugin of kind '" << kind << "', got one of kind '"
      << (entry->kind != nullptr ? entry->kind : "(null)") << "'";
  KILN_CHECK_VALUE(entry->init != nullptr) << what << "its entry has no init function";
  library.handle = nullptr;  // See Note [Plugins stay loaded].
  return std::make_shared<const PluginLibrary>(path, entry);
}

}  // namespace kiln
