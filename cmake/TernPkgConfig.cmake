# pkg_check_modules runs pkg-config only when its result is not cached yet. On that first run,
# FindPkgConfig (CMake 3.25) moves an "-isystem DIR" of the module's cflags into the include
# directories; on later runs it builds the imported target from the cache, where the flag is still
# a compile option. libzmq's "-isystem /usr/include/mit-krb5" therefore moved between two
# configures of a fresh build tree, every compile line changed, and the second ./run.sh rebuilt
# everything. Forgetting the cached checks makes every configure take the first path.
get_cmake_property(_tern_cache_vars CACHE_VARIABLES)
foreach(v ${_tern_cache_vars})
  if(v MATCHES "^__pkg_config_checked_")
    unset(${v} CACHE)
  endif()
endforeach()
