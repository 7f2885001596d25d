# Warning set for all C targets (STYLE.md §9); -Werror when TERN_WERROR.
set(TERN_C_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Wvla)
if(TERN_WERROR)
  list(APPEND TERN_C_WARNINGS -Werror)
endif()
# Feature macros are defined in one place.
add_compile_definitions(_GNU_SOURCE)
function(tern_target_warnings tgt)
  target_compile_options(${tgt} PRIVATE $<$<COMPILE_LANGUAGE:C>:${TERN_C_WARNINGS}>)
endfunction()
