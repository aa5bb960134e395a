# The CUDA backend as an OBJECT library; cuda/CMakeLists.txt links its objects into zbound_static and zbound.
# Kernel bodies live in .cuh files (encode.cuh, decode.cuh); the thin .cu files instantiate them per value type so
# that the two float types compile in parallel.
find_package(CUDAToolkit REQUIRED)
add_library(zbound_cuda_obj OBJECT
  gpu_ops.cu
  gpu_context.cu
  crc_gpu.cu
  scan_gpu.cu
  sparse_gpu.cu
  ratio_gpu.cu
  encode_f32.cu
  encode_f64.cu
  decode_f32.cu
  decode_f64.cu
  interp_f32.cu
  interp_f64.cu
  pwrel_gpu.cu
)
target_include_directories(zbound_cuda_obj PUBLIC ${PROJECT_SOURCE_DIR}/core/include ${PROJECT_SOURCE_DIR}/core/internal)
target_include_directories(zbound_cuda_obj PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
set_target_properties(zbound_cuda_obj PROPERTIES
  POSITION_INDEPENDENT_CODE ON
  CUDA_RUNTIME_LIBRARY Static
  CUDA_VISIBILITY_PRESET hidden)
# Results must not depend on FMA contraction on either side (-fmad=false comes from the top-level CMakeLists.txt).
target_compile_options(zbound_cuda_obj PRIVATE
  $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-ffp-contract=off>)
