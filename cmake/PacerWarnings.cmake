# Warnings for Pacer's own targets (not third-party code): call
# pacer_set_warnings(target) on every library and executable we build.
function(pacer_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion
      -Wno-sign-conversion -Wnon-virtual-dtor -Wold-style-cast -Wnull-dereference
      -Wimplicit-fallthrough>)
  # A unity build (-DCMAKE_UNITY_BUILD=ON: scripts/test.sh's sanitizer stage)
  # compiles each .cc as an #include of a batch file. Two warnings then
  # describe the batch, not the code: GCC takes a class a .cc defines for one
  # in a header and warns when it holds a type of that file's anonymous
  # namespace (-Wsubobject-linkage), and a local name shadows another file's
  # file-scope name (-Wshadow). The ordinary build, which CI runs first, keeps
  # both.
  if(CMAKE_UNITY_BUILD AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wno-subobject-linkage -Wno-shadow>)
  endif()
  if(PACER_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
    # GCC 12's -Wrestrict misfires inside libstdc++ on `"text" + std::string&&`
    # (operator+ -> insert -> memcpy "accessing 9223372036854775810 or more
    # bytes") once -O3 inlines it: GCC bug 105329 (Debian 12 ships 12.2). Every
    # `cmake -DCMAKE_BUILD_TYPE=Release` failed on it (planner/src/units.cc
    # first). Only that warning, only on GCC 12, stops being an error; it is
    # still printed, and other compilers keep it fatal.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_GREATER_EQUAL 12
       AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wno-error=restrict>)
    endif()
  endif()
endfunction()
