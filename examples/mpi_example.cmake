# mpi_write_read: parallel HDF5 (MPI-IO) with the zbound filter. Built only when MPI and the MPI flavour of HDF5 are
# installed (Debian: apt-get install libopenmpi-dev openmpi-bin libhdf5-openmpi-dev; scripts/setup.sh does it).
# It links that parallel libhdf5 by its full path under /usr/lib/x86_64-linux-gnu/hdf5/openmpi, never the serial
# one the rest of the build uses, and takes its headers from /usr/include/hdf5/openmpi.
find_package(MPI COMPONENTS C QUIET)
find_path(ZBOUND_PHDF5_INCLUDE_DIR H5pubconf.h
          HINTS /usr/include/hdf5/openmpi ENV ZBOUND_PHDF5_DIR PATH_SUFFIXES include NO_DEFAULT_PATH)
find_library(ZBOUND_PHDF5_LIBRARY NAMES hdf5 hdf5_openmpi
             HINTS /usr/lib/x86_64-linux-gnu/hdf5/openmpi ENV ZBOUND_PHDF5_DIR PATH_SUFFIXES lib NO_DEFAULT_PATH)
if(MPI_C_FOUND AND ZBOUND_PHDF5_INCLUDE_DIR AND ZBOUND_PHDF5_LIBRARY)
  file(STRINGS ${ZBOUND_PHDF5_INCLUDE_DIR}/H5pubconf.h _zb_phdf5_parallel REGEX "define H5_HAVE_PARALLEL 1")
endif()
if(MPI_C_FOUND AND _zb_phdf5_parallel)
  add_executable(mpi_write_read mpi_write_read.c)
  target_include_directories(mpi_write_read PRIVATE ${ZBOUND_PHDF5_INCLUDE_DIR})
  target_link_libraries(mpi_write_read PRIVATE ${ZBOUND_PHDF5_LIBRARY} MPI::MPI_C m)
  get_filename_component(_zb_phdf5_libdir ${ZBOUND_PHDF5_LIBRARY} DIRECTORY)
  set_target_properties(mpi_write_read PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/examples
                        BUILD_RPATH ${_zb_phdf5_libdir})
  find_program(ZBOUND_MPIEXEC NAMES mpirun mpiexec)
  message(STATUS "examples: parallel HDF5 found (${ZBOUND_PHDF5_LIBRARY}), mpi_write_read is built")
else()
  message(STATUS "examples: parallel HDF5 (MPI) not found, mpi_write_read is not built "
                 "(apt-get install libopenmpi-dev openmpi-bin libhdf5-openmpi-dev)")
endif()
