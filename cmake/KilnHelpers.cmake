# kiln_add_plugin(<name> SOURCES <file>...): a MODULE library (a custom op, pass plugin or backend
# plugin) linked to kiln::kiln. The registration macros in Kiln's headers stamp KILN_ABI_VERSION.
function(kiln_add_plugin name)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE kiln::kiln)
  set_target_properties(${name} PROPERTIES PREFIX "lib" CXX_VISIBILITY_PRESET hidden)
endfunction()
