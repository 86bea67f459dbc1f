# Warning flags for warpvm's own targets (host compiler and nvcc).
function(warpvm_set_warnings target)
  set(host_warnings -Wall -Wextra -Wshadow)
  if(WARPVM_WARNINGS_AS_ERRORS)
    list(APPEND host_warnings -Werror)
    set(cuda_werror -Werror=all-warnings)
  endif()
  string(REPLACE ";" "," host_warnings_csv "${host_warnings}")
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:${host_warnings}>
    $<$<COMPILE_LANGUAGE:CUDA>:--expt-relaxed-constexpr ${cuda_werror} -Xcompiler=${host_warnings_csv}>)
endfunction()
