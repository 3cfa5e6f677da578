# gpu_kernels.cmake - AMDGPU code objects: find a clang with the AMDGPU target, compile every kernel
# family (kernels/<family>/<family>.hip) for every arch of R35A_GPU_TARGETS, embed the code objects in the
# library (shared and static alike), and register the CPU-side checks of what was built.
#
# Included from the top-level CMakeLists.txt after the r35a_objects target exists. Sets:
#   R35A_HAVE_CODE_OBJECTS  ON when at least one code object is embedded.
#
# Nothing is compiled at run time: src/backend_hip.c hands the embedded bytes to hipModuleLoadData.
# Without a suitable clang (or with R35A_GPU_TARGETS empty) the library still builds; its table of
# code objects is then empty and the HIP backend says "built without gfx11 code objects".

set(R35A_GPU_TARGETS "gfx1151" CACHE STRING
    "gfx11 archs to build kernel code objects for (;-separated, from variants/archs.tsv: gfx1100 gfx1101 gfx1102 gfx1150 gfx1151 gfx1152); empty disables the GPU build")
set(R35A_HIP_CLANG "" CACHE FILEPATH
    "clang with the AMDGPU target for the kernels (default: clang-19, clang-18, clang, /opt/rocm/llvm/bin/clang)")
option(R35A_REQUIRE_GPU_KERNELS "Fail the configure step instead of building without GPU code objects (CI)" OFF)
# The lab build: measurement switches, never for use. With R35A_LAB_BUILD ON the kernels are
# compiled with R35A_LAB=1 and the NAME=VALUE definitions of R35A_LAB_DEFINES (the kernels'
# measurement switches are all named R35A_LAB_*: R35A_LAB_DEVICE_CHECKS=0 drops the device-metadata
# checks to measure what they cost, R35A_LAB_DECODE_TIMING=1 writes per-workgroup timestamps), and the
# host library honours the R35A_LAB_* environment knobs. Off, none of them exists.
option(R35A_LAB_BUILD "a measurement build for lab/ (kernel switches R35A_LAB_DEFINES, R35A_LAB_* knobs): never for use" OFF)
set(R35A_LAB_DEFINES "" CACHE STRING "lab builds only (R35A_LAB_BUILD): NAME=VALUE definitions for every kernel compile")
set(r35a_kernel_defines)
if(R35A_LAB_BUILD)
  set(r35a_kernel_defines -DR35A_LAB=1)
  foreach(def IN LISTS R35A_LAB_DEFINES)
    if(NOT def MATCHES "^R35A_LAB_")
      message(FATAL_ERROR "rdna35attn: R35A_LAB_DEFINES entry '${def}' is not a lab switch (R35A_LAB_*)")
    endif()
    list(APPEND r35a_kernel_defines -D${def})
  endforeach()
  target_compile_definitions(r35a_objects PRIVATE R35A_LAB=1)
  message(WARNING "rdna35attn: a lab build (R35A_LAB_BUILD; kernels with ${R35A_LAB_DEFINES}): a measurement build, not for use")
elseif(R35A_LAB_DEFINES)
  message(FATAL_ERROR "rdna35attn: R35A_LAB_DEFINES needs R35A_LAB_BUILD=ON (a measurement build)")
endif()

# Kernel families, one source each (kernels/<family>/<family>.hip). decode and generic are built whenever
# their source exists; encoder once variants/variants.def lists encoder variants (until then its
# source is work in progress and is not compiled).
set(R35A_KERNEL_FAMILY_CANDIDATES decode generic encoder)

set(R35A_HAVE_CODE_OBJECTS OFF)
set(r35a_gpu_dir ${CMAKE_CURRENT_BINARY_DIR}/gpu)
set(r35a_code_objects_c ${r35a_gpu_dir}/code_objects.c)
file(MAKE_DIRECTORY ${r35a_gpu_dir})

find_package(Python3 COMPONENTS Interpreter)

# True in ${out} when ${clang} compiles and links a trivial kernel for every arch in ${archs}
# (this also proves that the linker it needs, ld.lld, is found). ${why} says what failed.
function(r35a_probe_hip_clang clang archs out why)
  set(dir ${CMAKE_CURRENT_BINARY_DIR}/CMakeFiles/r35a_hip_probe)
  file(MAKE_DIRECTORY ${dir})
  file(WRITE ${dir}/probe.hip
    "extern \"C\" __attribute__((global)) void r35a_probe(float *p) { p[0] = 1.0f; }\n")
  foreach(arch IN LISTS archs)
    execute_process(
      COMMAND ${clang} -x hip --offload-arch=${arch} -nogpuinc -nogpulib --cuda-device-only
              --no-gpu-bundle-output -O1 -o ${dir}/probe_${arch}.co ${dir}/probe.hip
      RESULT_VARIABLE rc OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr)
    if(NOT rc EQUAL 0 OR NOT EXISTS ${dir}/probe_${arch}.co)
      string(REGEX REPLACE "\n.*" "" first_line "${stderr}")
      set(${out} FALSE PARENT_SCOPE)
      set(${why} "--offload-arch=${arch} failed: ${first_line}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} TRUE PARENT_SCOPE)
  set(${why} "" PARENT_SCOPE)
endfunction()

set(r35a_families "")
set(r35a_variants_def ${CMAKE_CURRENT_SOURCE_DIR}/variants/variants.def)
set(r35a_variants_text "")
if(EXISTS ${r35a_variants_def})
  file(READ ${r35a_variants_def} r35a_variants_text)
  # Re-run the configure step when the table changes (a family may appear).
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${r35a_variants_def})
endif()
foreach(family IN LISTS R35A_KERNEL_FAMILY_CANDIDATES)
  if(NOT EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/kernels/${family}/${family}.hip)
    continue()
  endif()
  if(family STREQUAL "encoder" AND NOT r35a_variants_text MATCHES "\nR35A_ENCODER_")
    continue()
  endif()
  list(APPEND r35a_families ${family})
endforeach()

# The compile units (tools/gen_variants.py --units): a family's kernels of one tuning table are built
# in several code objects, one per instance group (decode: dtype x K/V format, plus its split merges;
# encoder: dtype; generic: one), so the build spreads them over its jobs and a changed table row
# rebuilds one unit. The units are written into the build tree at configure time (rewritten only when
# their content changes); the configure step re-runs when variants.def changes. Sets, for the archs
# given: R35A_TUNING_OF_<arch> (its tuning table) and r35a_units_<tuning>_<family> (the unit groups).
set(r35a_unit_dir ${r35a_gpu_dir}/units)
macro(r35a_compile_units archs)
  execute_process(
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/tools/gen_variants.py --units ${r35a_unit_dir}
            --archs "${archs}"
    RESULT_VARIABLE r35a_units_rc OUTPUT_VARIABLE r35a_units_out ERROR_VARIABLE r35a_units_err)
  if(NOT r35a_units_rc EQUAL 0)
    message(FATAL_ERROR "rdna35attn: tools/gen_variants.py --units failed: ${r35a_units_err}")
  endif()
  string(REPLACE "\n" ";" r35a_units_lines "${r35a_units_out}")
  foreach(r35a_line IN LISTS r35a_units_lines)
    if(r35a_line)
      string(REPLACE " " ";" r35a_cells "${r35a_line}")
      list(GET r35a_cells 0 r35a_u_family)
      list(GET r35a_cells 1 r35a_u_group)
      list(GET r35a_cells 2 r35a_u_tuning)
      if(NOT r35a_u_group IN_LIST r35a_units_${r35a_u_tuning}_${r35a_u_family})
        list(APPEND r35a_units_${r35a_u_tuning}_${r35a_u_family} ${r35a_u_group})
      endif()
    endif()
  endforeach()
  foreach(r35a_a IN ITEMS ${archs})
    string(REGEX MATCH "\nR35A_GPU_ARCH\\(${r35a_a}, ([a-z0-9_]+)," r35a_m "${r35a_variants_text}")
    set(R35A_TUNING_OF_${r35a_a} ${CMAKE_MATCH_1})
  endforeach()
endmacro()

# Every target must be a gfx arch of the arch table (variants/archs.tsv -> R35A_GPU_ARCH rows of
# variants.def): it says which tuning rows the arch runs and how its runtime counts CUs.
foreach(arch IN LISTS R35A_GPU_TARGETS)
  if(NOT r35a_variants_text MATCHES "\nR35A_GPU_ARCH\\(${arch}, ")
    string(REGEX MATCHALL "\nR35A_GPU_ARCH\\((gfx[0-9a-f]+)" r35a_known "${r35a_variants_text}")
    string(REGEX REPLACE "\nR35A_GPU_ARCH\\(" "" r35a_known "${r35a_known}")
    message(FATAL_ERROR "rdna35attn: R35A_GPU_TARGETS lists ${arch}, which variants/archs.tsv does not know "
                        "(known: ${r35a_known}). Add its row there and run tools/gen_variants.py.")
  endif()
endforeach()

set(r35a_gpu_off_reason "")
if(NOT R35A_GPU_TARGETS)
  set(r35a_gpu_off_reason "R35A_GPU_TARGETS is empty")
  set(r35a_gpu_off_short "R35A_GPU_TARGETS was empty")
elseif(NOT r35a_families)
  set(r35a_gpu_off_reason "no kernel sources (kernels/<family>/<family>.hip) exist")
  set(r35a_gpu_off_short "no kernel sources")
elseif(NOT Python3_Interpreter_FOUND)
  set(r35a_gpu_off_reason "python3 (needed to embed the code objects) was not found")
  set(r35a_gpu_off_short "no python3 at build time")
else()
  # Find the clang: the cached choice if it still works, else the first candidate that works.
  if(R35A_HIP_CLANG)
    set(r35a_candidates ${R35A_HIP_CLANG})
  else()
    set(r35a_candidates "")
    foreach(name clang-19 clang-18 clang)
      find_program(R35A_CLANG_CANDIDATE_${name} NAMES ${name})
      mark_as_advanced(R35A_CLANG_CANDIDATE_${name})
      if(R35A_CLANG_CANDIDATE_${name})
        list(APPEND r35a_candidates ${R35A_CLANG_CANDIDATE_${name}})
      endif()
    endforeach()
    if(EXISTS /opt/rocm/llvm/bin/clang)
      list(APPEND r35a_candidates /opt/rocm/llvm/bin/clang)
    endif()
  endif()
  if(DEFINED CACHE{R35A_HIP_CLANG_CHECKED} AND "$CACHE{R35A_HIP_CLANG_CHECKED}" STREQUAL "${r35a_candidates}|${R35A_GPU_TARGETS}")
    set(r35a_clang "$CACHE{R35A_HIP_CLANG_WORKING}")
  else()
    set(r35a_clang "")
    set(r35a_tried "")
    foreach(candidate IN LISTS r35a_candidates)
      r35a_probe_hip_clang(${candidate} "${R35A_GPU_TARGETS}" ok why)
      if(ok)
        set(r35a_clang ${candidate})
        break()
      endif()
      list(APPEND r35a_tried "${candidate} (${why})")
    endforeach()
    if(NOT r35a_clang)
      list(JOIN r35a_tried "; " r35a_tried_text)
      set(R35A_HIP_CLANG_REJECTED "${r35a_tried_text}" CACHE INTERNAL "")
    endif()
    set(R35A_HIP_CLANG_WORKING "${r35a_clang}" CACHE INTERNAL "")
    set(R35A_HIP_CLANG_CHECKED "${r35a_candidates}|${R35A_GPU_TARGETS}" CACHE INTERNAL "")
  endif()
  if(NOT r35a_clang)
    if(r35a_candidates)
      set(r35a_gpu_off_reason "no clang accepts --offload-arch=${R35A_GPU_TARGETS}: $CACHE{R35A_HIP_CLANG_REJECTED}")
      set(r35a_gpu_off_short "no clang with the AMDGPU target at build time")
    else()
      set(r35a_gpu_off_reason "no clang found (looked for clang-19, clang-18, clang, /opt/rocm/llvm/bin/clang)")
      set(r35a_gpu_off_short "no clang at build time")
    endif()
  endif()
endif()

if(r35a_gpu_off_reason AND R35A_REQUIRE_GPU_KERNELS)
  message(FATAL_ERROR "rdna35attn: R35A_REQUIRE_GPU_KERNELS is ON but the GPU code objects cannot be built: "
                      "${r35a_gpu_off_reason}. Install clang-19, lld-19 and llvm-19 (tools/setup.sh --gpu-toolchain).")
endif()
set(r35a_code_objects "")
set(r35a_embed_args "")
if(r35a_gpu_off_reason)
  message(STATUS "rdna35attn: building WITHOUT AMDGPU code objects: ${r35a_gpu_off_reason}. "
                 "The HIP backend is unavailable. To build the gfx1151 kernels install "
                 "clang-19 and lld-19 (tools/setup.sh --gpu-toolchain) or pass -DR35A_HIP_CLANG=/path/to/clang.")
else()
  execute_process(COMMAND ${r35a_clang} --version OUTPUT_VARIABLE r35a_clang_version ERROR_QUIET)
  string(REGEX REPLACE "\n.*" "" r35a_clang_version "${r35a_clang_version}")
  message(STATUS "rdna35attn: GPU kernels for ${R35A_GPU_TARGETS} (${r35a_families}) with ${r35a_clang} (${r35a_clang_version})")
  set(R35A_HAVE_CODE_OBJECTS ON)

  set(r35a_kernel_flags -x hip -nogpuinc -nogpulib --cuda-device-only --no-gpu-bundle-output
      -O3 -std=c++17 -Wall -Wextra ${r35a_kernel_defines}
      -I ${CMAKE_CURRENT_SOURCE_DIR}/kernels -I ${CMAKE_CURRENT_SOURCE_DIR}/variants)
  r35a_compile_units("${R35A_GPU_TARGETS}")
  foreach(arch IN LISTS R35A_GPU_TARGETS)
    file(MAKE_DIRECTORY ${r35a_gpu_dir}/${arch})
    foreach(family IN LISTS r35a_families)
      set(R35A_CODE_OBJECTS_${arch}_${family} "")
      foreach(unit IN LISTS r35a_units_${R35A_TUNING_OF_${arch}}_${family})
        set(src ${r35a_unit_dir}/${R35A_TUNING_OF_${arch}}/${family}_${unit}.hip)
        set(co ${r35a_gpu_dir}/${arch}/${family}_${unit}.co)
        add_custom_command(
          OUTPUT ${co}
          COMMAND ${r35a_clang} ${r35a_kernel_flags} --offload-arch=${arch} -MD -MF ${co}.d -o ${co} ${src}
          MAIN_DEPENDENCY ${src}
          DEPFILE ${co}.d
          COMMENT "Building ${family} kernels ${unit} for ${arch}"
          VERBATIM)
        list(APPEND r35a_code_objects ${co})
        list(APPEND r35a_embed_args ${family}/${unit}:${arch}:${co})
        list(APPEND R35A_CODE_OBJECTS_${arch}_${family} ${co})
      endforeach()
    endforeach()
  endforeach()
endif()

# NVIDIA cubins of the same sources (R35A_NVIDIA_TARGETS, default empty).
include(${CMAKE_CURRENT_LIST_DIR}/nvidia_kernels.cmake)

if(NOT r35a_code_objects)
  if(r35a_gpu_off_short)
    set(r35a_absent "${r35a_gpu_off_short}; ${r35a_nvidia_off_short}")
  else()
    set(r35a_absent "${r35a_nvidia_off_short}")
  endif()
  file(CONFIGURE OUTPUT ${r35a_code_objects_c} CONTENT
"/* generated by cmake/gpu_kernels.cmake, do not edit: this build has no GPU code objects
 * (@r35a_absent@; see the configure log). */
#include \"code_objects.h\"

const r35a_code_object r35a_code_objects[] = {{NULL, NULL, NULL, NULL, 0}};
const size_t r35a_num_code_objects = 0;
const char r35a_code_objects_absent_reason[] = \"@r35a_absent@\";
" @ONLY)
else()
  add_custom_command(
    OUTPUT ${r35a_code_objects_c}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/tools/embed_code_objects.py
            --output ${r35a_code_objects_c} ${r35a_embed_args}
    DEPENDS ${r35a_code_objects} ${CMAKE_CURRENT_SOURCE_DIR}/tools/embed_code_objects.py
    COMMENT "Embedding the GPU code objects"
    VERBATIM)
  # `cmake --build . --target r35a_gpu_kernels` builds just the code objects. The library's objects
  # depend on it, so the kernels' rules never run twice in parallel for two targets.
  add_custom_target(r35a_gpu_kernels DEPENDS ${r35a_code_objects} ${r35a_test_code_objects})
  add_dependencies(r35a_objects r35a_gpu_kernels)
endif()

# The table is an object of its own, so the GPU tests' library can link the same host objects with a
# table that also holds the test-only code objects.
function(r35a_code_object_table target source)
  add_library(${target} OBJECT ${source})
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  # the table's rule depends on the code objects: without this target-level order a parallel make
  # would run their compile rules a second time, at once, for this target
  if(TARGET r35a_gpu_kernels)
    add_dependencies(${target} r35a_gpu_kernels)
  endif()
endfunction()
r35a_code_object_table(r35a_code_object_table ${r35a_code_objects_c})
target_sources(rdna35attn PRIVATE $<TARGET_OBJECTS:r35a_code_object_table>)
target_sources(rdna35attn_static PRIVATE $<TARGET_OBJECTS:r35a_code_object_table>)

# The GPU tests' library (tests/gpu/: test_gpu_cuda, fuzz_gpu, soak_gpu): the library plus the
# test-only code objects (NVIDIA's gfx11-emulation cubins, nvidia_kernels.cmake). Never installed.
# R35A_GPU_TEST_LIBRARY names the library those tests link.
set(R35A_GPU_TEST_LIBRARY rdna35attn)
if(r35a_test_embed_args)
  set(r35a_test_code_objects_c ${r35a_gpu_dir}/code_objects_test.c)
  add_custom_command(
    OUTPUT ${r35a_test_code_objects_c}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/tools/embed_code_objects.py
            --output ${r35a_test_code_objects_c} ${r35a_embed_args} ${r35a_test_embed_args}
    DEPENDS ${r35a_code_objects} ${r35a_test_code_objects} ${CMAKE_CURRENT_SOURCE_DIR}/tools/embed_code_objects.py
    COMMENT "Embedding the GPU code objects and the test-only ones"
    VERBATIM)
  r35a_code_object_table(r35a_code_object_table_test ${r35a_test_code_objects_c})
  add_library(rdna35attn_gputest SHARED $<TARGET_OBJECTS:r35a_objects> $<TARGET_OBJECTS:r35a_code_object_table_test>)
  target_include_directories(rdna35attn_gputest PUBLIC $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>)
  target_link_libraries(rdna35attn_gputest PRIVATE m Threads::Threads ${CMAKE_DL_LIBS})
  # the library's version script too: src/api.c's .symver lines name its version nodes (newer GNU ld
  # refuses a versioned symbol whose node no script defines)
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang" AND NOT APPLE AND NOT WIN32)
    target_link_options(rdna35attn_gputest PRIVATE "LINKER:--version-script=${CMAKE_CURRENT_SOURCE_DIR}/src/rdna35attn.map")
    set_property(TARGET rdna35attn_gputest APPEND PROPERTY LINK_DEPENDS "${CMAKE_CURRENT_SOURCE_DIR}/src/rdna35attn.map")
  endif()
  set(R35A_GPU_TEST_LIBRARY rdna35attn_gputest)
endif()
# src/registry.c and the planners (src/plan_*.c) read the kernel registry (variants/variants.def)
# and the kernels' argument structs and launch formulas (kernels/common/<family>_args.h).
target_include_directories(r35a_objects PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src
                           ${CMAKE_CURRENT_SOURCE_DIR}/kernels ${CMAKE_CURRENT_SOURCE_DIR}/variants)
if(R35A_HAVE_CODE_OBJECTS)
  target_compile_definitions(r35a_objects PRIVATE R35A_HAVE_CODE_OBJECTS=1)
endif()

# ---- CPU-side checks (ctest) ----
if(R35A_BUILD_TESTS)
  enable_testing()

  if(Python3_Interpreter_FOUND AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/tools/gen_variants.py)
    add_test(NAME variants_def_in_sync
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/tools/gen_variants.py --check
             WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
    # the compile units of every table, NVIDIA's included (which this build may not configure)
    add_test(NAME variants_units_all_archs
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/tools/gen_variants.py
                     --units ${CMAKE_CURRENT_BINARY_DIR}/units_check --archs "gfx1151;sm_90")
  endif()

  if(R35A_HAVE_CODE_OBJECTS)
    # The static checks read the code objects with LLVM's tools; take the ones of the clang's release.
    get_filename_component(r35a_clang_dir ${r35a_clang} DIRECTORY)
    get_filename_component(r35a_clang_name ${r35a_clang} NAME)
    string(REGEX MATCH "-[0-9]+$" r35a_llvm_suffix "${r35a_clang_name}")
    find_program(R35A_LLVM_READELF NAMES llvm-readelf${r35a_llvm_suffix} llvm-readelf-19 llvm-readelf
                 HINTS ${r35a_clang_dir})
    find_program(R35A_LLVM_OBJDUMP NAMES llvm-objdump${r35a_llvm_suffix} llvm-objdump-19 llvm-objdump
                 HINTS ${r35a_clang_dir})
    if(R35A_LLVM_READELF AND R35A_LLVM_OBJDUMP)
      # The host's view of the kernel interface (argument struct sizes, launch sizes), which the
      # code objects' metadata must match.
      add_executable(r35a_kernel_abi ${CMAKE_CURRENT_SOURCE_DIR}/tests/hip/kernel_abi.c)
      target_include_directories(r35a_kernel_abi PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/kernels)
      target_compile_options(r35a_kernel_abi PRIVATE ${R35A_WARNINGS})
      foreach(arch IN LISTS R35A_GPU_TARGETS)
        foreach(family IN LISTS r35a_families)
          add_test(NAME code_object_${arch}_${family}
                   COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/tools/check_code_objects.py
                           --readelf ${R35A_LLVM_READELF} --objdump ${R35A_LLVM_OBJDUMP}
                           --arch ${arch} --family ${family}
                           --variants ${CMAKE_CURRENT_SOURCE_DIR}/variants/variants.def
                           --abi $<TARGET_FILE:r35a_kernel_abi>
                           ${R35A_CODE_OBJECTS_${arch}_${family}})
        endforeach()
      endforeach()
    elseif(R35A_REQUIRE_GPU_KERNELS)
      message(FATAL_ERROR "rdna35attn: R35A_REQUIRE_GPU_KERNELS is ON but llvm-readelf/llvm-objdump were not "
                          "found for the static checks (install llvm-19)")
    else()
      message(WARNING "rdna35attn: llvm-readelf/llvm-objdump not found (install llvm-19): "
                      "the static checks of the code objects are not registered")
    endif()
  endif()
endif()

# ---- the HIP backend's tests (tests/hip/): planner unit test, HIP-absent behaviour, and the
# backend driven through a stand-in HIP runtime (tests/hip/fake_hip.c) ----
if(R35A_BUILD_TESTS)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(R35A_HIP_CMOCKA QUIET cmocka)
  endif()
  find_path(R35A_HIP_CMOCKA_H cmocka.h HINTS ${R35A_HIP_CMOCKA_INCLUDE_DIRS})
  find_library(R35A_HIP_CMOCKA_LIB cmocka HINTS ${R35A_HIP_CMOCKA_LIBRARY_DIRS})
  if(NOT R35A_HIP_CMOCKA_H OR NOT R35A_HIP_CMOCKA_LIB)
    message(WARNING "rdna35attn: cmocka not found: the HIP backend tests are not built")
  else()
    set(r35a_hip_tests ${CMAKE_CURRENT_SOURCE_DIR}/tests/hip)
    set(r35a_hip_test_includes ${CMAKE_CURRENT_SOURCE_DIR}/src ${CMAKE_CURRENT_SOURCE_DIR}/kernels
        ${CMAKE_CURRENT_SOURCE_DIR}/variants ${R35A_HIP_CMOCKA_H})

    add_executable(test_planner_gfx1151 ${r35a_hip_tests}/test_planner.c)
    target_include_directories(test_planner_gfx1151 PRIVATE ${r35a_hip_test_includes})
    target_compile_options(test_planner_gfx1151 PRIVATE ${R35A_WARNINGS})
    target_link_libraries(test_planner_gfx1151 PRIVATE rdna35attn_static ${R35A_HIP_CMOCKA_LIB} m)
    add_test(NAME planner_gfx1151 COMMAND test_planner_gfx1151)
    set_tests_properties(planner_gfx1151 PROPERTIES ENVIRONMENT "R35A_LOG=0")

    add_library(r35a_fake_hip MODULE ${r35a_hip_tests}/fake_hip.c)
    target_include_directories(r35a_fake_hip PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/kernels)
    target_compile_options(r35a_fake_hip PRIVATE ${R35A_WARNINGS})

    add_executable(test_hip_backend ${r35a_hip_tests}/test_hip_backend.c)
    target_include_directories(test_hip_backend PRIVATE ${r35a_hip_test_includes})
    target_compile_options(test_hip_backend PRIVATE ${R35A_WARNINGS})
    target_link_libraries(test_hip_backend PRIVATE rdna35attn ${R35A_HIP_CMOCKA_LIB} ${CMAKE_DL_LIBS})
    add_dependencies(test_hip_backend r35a_fake_hip)
    if(R35A_HAVE_CODE_OBJECTS)
      target_compile_definitions(test_hip_backend PRIVATE R35A_HAVE_CODE_OBJECTS=1)
    endif()

    # Each mode is its own process: the library reads R35A_* knobs once per process.
    add_test(NAME hip_backend_absent COMMAND test_hip_backend absent)
    set_tests_properties(hip_backend_absent PROPERTIES ENVIRONMENT "R35A_LOG=0;R35A_HIP_LIBRARY=")
    if(R35A_HAVE_CODE_OBJECTS)
      set(r35a_fake "R35A_LOG=0;R35A_HIP_LIBRARY=$<TARGET_FILE:r35a_fake_hip>")
      add_test(NAME hip_backend_wrong_arch COMMAND test_hip_backend wrong_arch)
      set_tests_properties(hip_backend_wrong_arch PROPERTIES ENVIRONMENT "${r35a_fake};FAKE_HIP_ARCH=gfx90a")
      add_test(NAME hip_backend_no_device COMMAND test_hip_backend no_device)
      set_tests_properties(hip_backend_no_device PROPERTIES ENVIRONMENT "${r35a_fake};FAKE_HIP_DEVICES=0")
      add_test(NAME hip_backend_fake_gfx1151 COMMAND test_hip_backend gpu)
      set_tests_properties(hip_backend_fake_gfx1151 PROPERTIES ENVIRONMENT "${r35a_fake};FAKE_HIP_ARCH=gfx1151")
      add_test(NAME hip_backend_force_variant COMMAND test_hip_backend force_variant)
      set_tests_properties(hip_backend_force_variant PROPERTIES
                           ENVIRONMENT "${r35a_fake};R35A_FORCE=decode_f16_d128_r32_kw1_dw4_w8_wmma16_pregs2_qregs")
      add_test(NAME hip_backend_force_generic COMMAND test_hip_backend force_generic)
      set_tests_properties(hip_backend_force_generic PROPERTIES ENVIRONMENT "${r35a_fake};R35A_FORCE=generic")
      add_test(NAME hip_backend_force_encoder COMMAND test_hip_backend force_encoder)
      set_tests_properties(hip_backend_force_encoder PROPERTIES
                           ENVIRONMENT "${r35a_fake};R35A_FORCE=encoder_f16_d64_r32_kb32_nw4_w6")
    endif()
  endif()
endif()
