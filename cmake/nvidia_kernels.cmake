# nvidia_kernels.cmake - NVIDIA cubins of the same kernel sources (kernels/<family>/<family>.hip compiled as
# CUDA by nvcc through kernels/common/device.h's CUDA branch), embedded next to the AMDGPU code
# objects. Included by gpu_kernels.cmake; appends to its lists r35a_code_objects / r35a_embed_args.
#
# R35A_NVIDIA_TARGETS (default empty: nothing is built, the CPU CI needs no nvcc) lists archs such as
# sm_90. For each arch and family (in its compile units, gpu_kernels.cmake) two sets of cubins are
# built when the family uses the fragment layer:
#   <family>           native fragments (fragment_nv_mma.h: mma.sync)
#   <family>.gfx11emu  the gfx11-exact fragment emulation (fragment_nv_gfx11emu.h), for tests
# src/backend_cuda.c loads one of the two per family (R35A_CUDA_FRAGMENTS=gfx11emu picks the second).
# The emulation cubins are a test artifact: they go into the GPU tests' library (rdna35attn_gputest,
# gpu_kernels.cmake), never into the library a user installs; built when R35A_NVIDIA_EMULATION_CUBINS
# is ON (by default when the tests are built; lab/gpu_suite.sh turns it on for the GPU machine, which
# builds without the cmocka tests).
# Sets R35A_HAVE_NVIDIA_CUBINS.

set(R35A_NVIDIA_TARGETS "" CACHE STRING
    "NVIDIA archs to build kernel cubins for (e.g. sm_90; ;-separated); empty disables the NVIDIA build")
set(R35A_NVCC "" CACHE FILEPATH "nvcc for the NVIDIA kernels (default: nvcc on PATH, then /usr/local/cuda/bin/nvcc)")
option(R35A_NVIDIA_EMULATION_CUBINS
       "also build the gfx11-emulation cubins, into the GPU tests' library rdna35attn_gputest (default: with the tests)"
       ${R35A_BUILD_TESTS})
set(R35A_HAVE_NVIDIA_CUBINS OFF)
set(r35a_nvidia_off_short "R35A_NVIDIA_TARGETS was empty")

if(R35A_NVIDIA_TARGETS)
  if(R35A_NVCC)
    set(r35a_nvcc ${R35A_NVCC})
  else()
    find_program(R35A_NVCC_FOUND NAMES nvcc HINTS /usr/local/cuda/bin)
    mark_as_advanced(R35A_NVCC_FOUND)
    set(r35a_nvcc ${R35A_NVCC_FOUND})
  endif()
  if(NOT r35a_nvcc OR NOT Python3_Interpreter_FOUND)
    message(FATAL_ERROR "rdna35attn: R35A_NVIDIA_TARGETS=${R35A_NVIDIA_TARGETS} needs nvcc (set R35A_NVCC) and python3")
  endif()
  message(STATUS "rdna35attn: NVIDIA kernels for ${R35A_NVIDIA_TARGETS} (${r35a_families}) with ${r35a_nvcc}")
  set(R35A_HAVE_NVIDIA_CUBINS ON)
  # ptxas warns about spills and about any local memory (a stack array: a register array indexed
  # at run time), which cost what spills cost
  set(r35a_nvcc_flags -x cu -cubin -O3 -std=c++17 -Xptxas -warn-spills -Xptxas -warn-lmem-usage ${r35a_kernel_defines}
      -I ${CMAKE_CURRENT_SOURCE_DIR}/kernels -I ${CMAKE_CURRENT_SOURCE_DIR}/variants)
  foreach(arch IN LISTS R35A_NVIDIA_TARGETS)
    if(NOT arch MATCHES "^sm_[0-9]+a?$")
      message(FATAL_ERROR "rdna35attn: R35A_NVIDIA_TARGETS entry '${arch}' is not sm_<N>")
    endif()
  endforeach()
  r35a_compile_units("${R35A_NVIDIA_TARGETS}")
  foreach(arch IN LISTS R35A_NVIDIA_TARGETS)
    file(MAKE_DIRECTORY ${r35a_gpu_dir}/${arch})
    foreach(family IN LISTS r35a_families)
      set(modes native)
      if(R35A_NVIDIA_EMULATION_CUBINS AND NOT family STREQUAL "generic")   # generic.hip has no matrix fragments
        list(APPEND modes gfx11emu)
      endif()
      foreach(mode IN LISTS modes)
        foreach(unit IN LISTS r35a_units_${R35A_TUNING_OF_${arch}}_${family})
          set(src ${r35a_unit_dir}/${R35A_TUNING_OF_${arch}}/${family}_${unit}.hip)
          if(mode STREQUAL "native")
            set(tag ${family})
            set(defs -DR35A_FRAGMENT_EMULATE_GFX11=0)
          else()
            set(tag ${family}.${mode})
            set(defs -DR35A_FRAGMENT_EMULATE_GFX11=1)
          endif()
          set(cubin ${r35a_gpu_dir}/${arch}/${tag}_${unit}.cubin)
          add_custom_command(
            OUTPUT ${cubin}
            COMMAND ${r35a_nvcc} ${r35a_nvcc_flags} -arch=${arch} ${defs} -MD -MF ${cubin}.d -o ${cubin} ${src}
            MAIN_DEPENDENCY ${src}
            DEPFILE ${cubin}.d
            COMMENT "Building ${tag} kernels ${unit} for ${arch}"
            VERBATIM)
          if(mode STREQUAL "native")
            list(APPEND r35a_code_objects ${cubin})
            list(APPEND r35a_embed_args ${tag}/${unit}:${arch}:${cubin})
          else()
            list(APPEND r35a_test_code_objects ${cubin})
            list(APPEND r35a_test_embed_args ${tag}/${unit}:${arch}:${cubin})
          endif()
        endforeach()
      endforeach()
    endforeach()
  endforeach()
endif()
