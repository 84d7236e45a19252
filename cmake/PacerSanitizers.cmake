# ASan + UBSan for the whole build when PACER_SANITIZE=ON. CI runs the test
# suite once in this configuration (see .ci/run). UBSan findings are fatal so
# that a test fails instead of printing and passing.
if(PACER_SANITIZE)
  set(_pacer_san -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:${_pacer_san}>)
  add_link_options(${_pacer_san})
endif()
