# Helpers shared by the build-time embedding scripts (cmake/embed_text.cmake,
# prompts/embed_templates.cmake, agent/export_templates/embed.cmake), included in script mode.

# Sets `out_var` to the C++ raw string literal R"DELIM(text)DELIM" of the file `path`; fails the
# build naming the file when its text contains the closing delimiter.
function(kloop_raw_literal out_var path delim)
  file(READ "${path}" text)
  string(FIND "${text}" ")${delim}\"" clash)
  if(NOT clash EQUAL -1)
    message(FATAL_ERROR "${path} contains the raw-string delimiter )${delim}\"; it cannot be "
                        "embedded: reword it")
  endif()
  set(${out_var} "R\"${delim}(${text})${delim}\"" PARENT_SCOPE)
endfunction()

# Writes `content` to `path` only when it differs, so an unchanged input does not rebuild.
function(kloop_write_if_changed path content)
  set(previous "")
  if(EXISTS "${path}")
    file(READ "${path}" previous)
  endif()
  if(NOT previous STREQUAL content)
    file(WRITE "${path}" "${content}")
  endif()
endfunction()
