# ctest sdk_headers: fails when a public header (include/tsfuse/*.h) includes anything but another
# public header, torch (torch/, c10/, ATen/) or the C++ standard library. The SDK installs
# include/tsfuse alone, so an include of registration/, passes/, kernels/ or a third-party library
# would break every app built against it.
#
#   cmake -DSDK_DIR=<source>/include -P cmake/check_sdk_headers.cmake
file(GLOB_RECURSE headers "${SDK_DIR}/tsfuse/*.h")
if(NOT headers)
  message(FATAL_ERROR "no public headers under ${SDK_DIR}/tsfuse")
endif()
set(problems 0)
foreach(header ${headers})
  file(STRINGS "${header}" lines REGEX "^[ \t]*#[ \t]*include")
  foreach(line ${lines})
    if(line MATCHES "include[ \t]*\"([^\"]+)\"")
      set(path "${CMAKE_MATCH_1}")  # the next MATCHES overwrites CMAKE_MATCH_1
      if(NOT path MATCHES "^tsfuse/" OR NOT EXISTS "${SDK_DIR}/${path}")
        message(SEND_ERROR "${header}: \"${path}\" is not a public header (include/tsfuse/)")
        math(EXPR problems "${problems} + 1")
      endif()
    elseif(line MATCHES "include[ \t]*<([^>]+)>")
      set(path "${CMAKE_MATCH_1}")
      if(NOT path MATCHES "^(torch|c10|ATen)/" AND NOT path MATCHES "^[a-z_]+$")
        message(SEND_ERROR "${header}: <${path}> is neither torch nor the C++ standard library")
        math(EXPR problems "${problems} + 1")
      endif()
    else()
      message(SEND_ERROR "${header}: unrecognised include: ${line}")
      math(EXPR problems "${problems} + 1")
    endif()
  endforeach()
endforeach()
list(LENGTH headers count)
message(STATUS "sdk_headers: ${count} public headers, ${problems} problems")
