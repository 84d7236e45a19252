# ASan + UBSan for the whole build when PACER_SANITIZE=ON. CI runs the test
# suite once in this configuration (see scripts/test.sh). UBSan findings are
# fatal so that a test fails instead of printing and passing.
if(PACER_SANITIZE)
  # -fno-sanitize=vptr: cpprestsdk's stream templates are instantiated in our
  # code while their typeinfo lives in libcpprest.so, which is not built with
  # UBSan, so the vptr check reports every HTTP body as the wrong type (a
  # false positive in the controller's clients, local mode and health server).
  set(_pacer_san -fsanitize=address,undefined -fno-sanitize=vptr -fno-sanitize-recover=all
      -fno-omit-frame-pointer)
  foreach(_flag IN LISTS _pacer_san)
    # Host C++ only: nvcc does not take these flags.
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:${_flag}>)
  endforeach()
  add_link_options(${_pacer_san})
endif()

# ThreadSanitizer when PACER_TSAN=ON: only the threaded code's tests are
# meant to be built in this configuration (tests/tsan/), see scripts/test.sh.
# TSan cannot be combined with ASan in one build.
if(PACER_TSAN)
  if(PACER_SANITIZE)
    message(FATAL_ERROR "PACER_TSAN and PACER_SANITIZE exclude each other: use two build folders")
  endif()
  set(_pacer_tsan -fsanitize=thread -fno-omit-frame-pointer)
  foreach(_flag IN LISTS _pacer_tsan)
    add_compile_options($<$<COMPILE_LANGUAGE:CXX>:${_flag}>)
  endforeach()
  add_link_options(${_pacer_tsan})
  # GCC 12 warns that TSan does not model std::atomic_thread_fence, which
  # Boost.Asio's fenced blocks use (the test API server, cpprestsdk's
  # headers): a false positive it may cause is suppressed in tsan.supp, and
  # our code uses no fences.
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wno-tsan>)
endif()

# pacer_optimize_under_sanitizers(target): compile the target at -O1 in the
# ASan + UBSan build (a Debug build, otherwise -O0). For the training step's
# arithmetic (worker/core, worker/cpu), whose elementwise loops every
# pacer-worker a test starts runs; -O1 is the level the ASan documentation
# recommends for speed. Figures: docs/development.md.
function(pacer_optimize_under_sanitizers target)
  if(PACER_SANITIZE)
    target_compile_options(${target} PRIVATE
      $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:Debug>>:-O1>)
  endif()
endfunction()
