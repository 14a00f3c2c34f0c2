# so_embed(TARGET FILE SYMBOL): compiles FILE (relative to the source tree)
# into TARGET as `const unsigned char SYMBOL[]` (NUL-terminated) and
# `const size_t SYMBOL_len`, regenerated at build time whenever FILE changes.
# Used for the report page's assets (scaleout report), so the binary needs no
# install paths.
function(so_embed target file symbol)
  set(out ${CMAKE_BINARY_DIR}/embed/${symbol}.c)
  add_custom_command(OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DIN=${CMAKE_SOURCE_DIR}/${file} -DOUT=${out} -DNAME=${symbol}
            -P ${CMAKE_SOURCE_DIR}/cmake/embed_file.cmake
    DEPENDS ${CMAKE_SOURCE_DIR}/${file} ${CMAKE_SOURCE_DIR}/cmake/embed_file.cmake
    COMMENT "Embedding ${file}" VERBATIM)
  target_sources(${target} PRIVATE ${out})
endfunction()
