#include "core/plugin.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "kiln/error.h"

namespace kiln {
namespace {

const char* kEntry = "kiln_plugin_extension_entry";

std::string plugin(const std::string& name) {
  return std::string(KILN_TEST_PLUGIN_DIR) + "/lib" + name + ".so";
}

// The message of the kiln::Error that `load_plugin(path, ...)` throws (fails the test if none).
std::string load_error(const std::string& path, const char* kind = "extension") {
  try {
    load_plugin(path, kEntry, kind);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kValue);
    return e.what();
  }
  ADD_FAILURE() << "expected load_plugin(" << path << ") to throw";
  return "";
}

TEST(Plugin, AbiVersionIsTheHeaders) { EXPECT_EQ(abi_version(), KILN_ABI_VERSION); }

TEST(Plugin, Loads_WhenEntryAndVersionMatch) {
  auto lib = load_plugin(plugin("good_extension"), kEntry, "extension");
  EXPECT_EQ(lib->entry().abi_version, static_cast<uint32_t>(KILN_ABI_VERSION));
  EXPECT_STREQ(lib->entry().kind, "extension");
  EXPECT_EQ(lib->path(), plugin("good_extension"));
}

TEST(Plugin, NamesTheFile_WhenMissing) {
  const std::string msg = load_error("/nonexistent/libnothing.so");
  EXPECT_NE(msg.find("/nonexistent/libnothing.so"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no such file"), std::string::npos) << msg;
}

TEST(Plugin, SaysNotASharedLibrary_WhenNotElf) {
  const std::string path = testing::TempDir() + "kiln_not_a_library.so";
  std::ofstream(path) << "#!/bin/sh\necho this is text\n";
  const std::string msg = load_error(path);
  std::remove(path.c_str());
  EXPECT_NE(msg.find("not a shared library"), std::string::npos) << msg;
}

TEST(Plugin, NamesTheEntryPoint_WhenAbsent) {
  const std::string msg = load_error(plugin("no_entry_library"));
  EXPECT_NE(msg.find("has no entry point kiln_plugin_extension_entry"), std::string::npos) << msg;
}

TEST(Plugin, NamesBothVersions_WhenAbiDiffers) {
  const std::string msg = load_error(plugin("abi_mismatch_extension"));
  const std::string theirs = "ABI version " + std::to_string(KILN_ABI_VERSION + 1);
  const std::string ours = "this Kiln has ABI version " + std::to_string(KILN_ABI_VERSION);
  EXPECT_NE(msg.find(theirs), std::string::npos) << msg;
  EXPECT_NE(msg.find(ours), std::string::npos) << msg;
  EXPECT_NE(msg.find("rebuild"), std::string::npos) << msg;
}

TEST(Plugin, NamesBothKinds_WhenKindDiffers) {
  const std::string msg = load_error(plugin("pass_kind_plugin"));
  EXPECT_NE(msg.find("expected a plugin of kind 'extension', got one of kind 'pass'"),
            std::string::npos)
      << msg;
}

}  // namespace
}  // namespace kiln
