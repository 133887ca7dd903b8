# kloop's data beside its executables: PREFIX/bin (kloop and its workers) and PREFIX/share/kloop
# (the in-tree baselines, the prompt templates, the operator contracts), found at run time relative
# to the executable (evaluator::data_path). The build tree stages the same layout in
# BUILD/share/kloop, so a build and an installed copy find their data the same way and neither
# reads the source tree.
set(KLOOP_DATA_STAGE ${CMAKE_BINARY_DIR}/share/kloop)
# Every operator folder (kernels/<name>/operator.cpp): its baseline and its contract.
file(GLOB KLOOP_OPERATOR_SOURCES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/kernels/*/operator.cpp)
set(KLOOP_STAGE_COMMANDS)
foreach(file IN LISTS KLOOP_OPERATOR_SOURCES)
  get_filename_component(dir ${file} DIRECTORY)
  get_filename_component(name ${dir} NAME)
  list(APPEND KLOOP_STAGE_COMMANDS COMMAND ${CMAKE_COMMAND} -E copy_directory ${dir}/baseline
       ${KLOOP_DATA_STAGE}/kernels/${name}/baseline COMMAND $<TARGET_FILE:kloop> contract ${name}
       --out ${KLOOP_DATA_STAGE}/contracts/${name}.json)
endforeach()
add_custom_target(
  kloop_data ALL
  COMMAND ${CMAKE_COMMAND} -E make_directory ${KLOOP_DATA_STAGE}/contracts
  ${KLOOP_STAGE_COMMANDS}
  COMMAND ${CMAKE_COMMAND} -E copy_directory ${CMAKE_SOURCE_DIR}/prompts/templates
          ${KLOOP_DATA_STAGE}/prompts/templates
  COMMENT "Staging kloop's data in share/kloop"
  VERBATIM)
add_dependencies(kloop_data kloop)

install(TARGETS kloop RUNTIME DESTINATION bin)
foreach(worker kloop-build-worker kloop-gpu-worker)
  if(TARGET ${worker})
    install(TARGETS ${worker} RUNTIME DESTINATION bin)
  endif()
endforeach()
install(DIRECTORY ${KLOOP_DATA_STAGE}/ DESTINATION share/kloop)
