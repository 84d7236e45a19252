# Warnings for Pacer's own targets (not third-party code): call
# pacer_set_warnings(target) on every library and executable we build.
function(pacer_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion
      -Wno-sign-conversion -Wnon-virtual-dtor -Wold-style-cast -Wnull-dereference
      -Wimplicit-fallthrough>)
  if(PACER_WERROR)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
  endif()
endfunction()
