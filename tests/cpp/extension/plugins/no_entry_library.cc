// A shared library that is not a Kiln plugin: it exports no entry point.
extern "C" __attribute__((visibility("default"))) int not_a_plugin() { return 1; }
