#!/bin/bash
# Build the corpus into OUT (never into the repository).
#   bash corpus/build.sh OUT [GROUP...]     GROUP: cuda opencl python (default: all)
# Each program NAME lands in OUT/NAME/ with whatever it reads at run time
# (fatbins, .cl files, its Python sources); OUT/NAME/BUILD_OK marks success and
# OUT/logs/NAME.build.log keeps the compiler's output.  Compiled with the flags
# of the upstream Makefiles/CMake files, for the H200 (sm_90; CUDA_ARCH=NN to change).
set -u
C=$(cd "$(dirname "$0")" && pwd)
B=${1:?usage: build.sh OUT [cuda|opencl|python]...}; shift
mkdir -p "$B/logs"; B=$(cd "$B" && pwd)
GROUPS_=${*:-cuda opencl python}
ARCH=${CUDA_ARCH:-90}
COMMON=$C/cuda-samples-common
NVCC="nvcc -O2 -std=c++17 -Wno-deprecated-gpu-targets -gencode arch=compute_$ARCH,code=sm_$ARCH -I$COMMON"
FATBIN="nvcc -Wno-deprecated-gpu-targets -gencode arch=compute_$ARCH,code=sm_$ARCH -fatbin"
CLDEF="-DCL_TARGET_OPENCL_VERSION=300"
CLHPP="-DCL_TARGET_OPENCL_VERSION=300 -DCL_HPP_TARGET_OPENCL_VERSION=300 -DCL_HPP_MINIMUM_OPENCL_VERSION=300 -DCL_HPP_ENABLE_EXCEPTIONS"
HC=$C/hoocl-common

one() { # NAME COMMANDS...: run the commands (a string) in $C/NAME, output dir $O
  local n=$1 cmd=$2
  ( O=$B/$n; rm -rf "$O"; mkdir -p "$O"; cd "$C/$n" || exit 1
    export O
    if bash -ec "$cmd" > "$B/logs/$n.build.log" 2>&1; then touch "$O/BUILD_OK"; echo "built $n"; else echo "FAILED $n (see logs/$n.build.log)"; fi ) &
}

cuda() {
  one vectorAdd               '$NVCC -o $O/vectorAdd vectorAdd.cu'
  one vectorAddDrv            '$FATBIN -o $O/vectorAdd_kernel64.fatbin vectorAdd_kernel.cu; $NVCC -o $O/vectorAddDrv vectorAddDrv.cpp -lcuda'
  one vectorAddMMAP           '$FATBIN -o $O/vectorAdd_kernel64.fatbin vectorAdd_kernel.cu; $NVCC -o $O/vectorAddMMAP vectorAddMMAP.cpp multidevicealloc_memmap.cpp -lcuda'
  one simpleDrvRuntime        '$FATBIN -o $O/vectorAdd_kernel64.fatbin vectorAdd_kernel.cu; $NVCC -o $O/simpleDrvRuntime simpleDrvRuntime.cpp -lcuda'
  one matrixMul               '$NVCC -o $O/matrixMul matrixMul.cu'
  one asyncAPI                '$NVCC -o $O/asyncAPI asyncAPI.cu'
  one simpleStreams           '$NVCC -o $O/simpleStreams simpleStreams.cu'
  one simpleCallback          '$NVCC -o $O/simpleCallback simpleCallback.cu multithreading.cpp'
  one simpleZeroCopy          '$NVCC -o $O/simpleZeroCopy simpleZeroCopy.cu'
  one UnifiedMemoryStreams    '$NVCC -Xcompiler -fopenmp -o $O/UnifiedMemoryStreams UnifiedMemoryStreams.cu -lcublas -lgomp'
  one UnifiedMemoryPerf       '$NVCC -o $O/UnifiedMemoryPerf helperFunctions.cpp matrixMultiplyPerf.cu commonKernels.cu -lcuda'
  one graphMemoryNodes        '$NVCC -o $O/graphMemoryNodes graphMemoryNodes.cu'
  one graphMemoryFootprint    '$NVCC -o $O/graphMemoryFootprint graphMemoryFootprint.cu'
  one simpleCudaGraphs        '$NVCC -o $O/simpleCudaGraphs simpleCudaGraphs.cu'
  one streamOrderedAllocation '$NVCC -o $O/streamOrderedAllocation streamOrderedAllocation.cu'
  one simpleCUBLAS            '$NVCC -o $O/simpleCUBLAS simpleCUBLAS.cpp -lcublas'
  one simpleCUFFT             '$NVCC -o $O/simpleCUFFT simpleCUFFT.cu -lcufft'
  one conjugateGradientPrecond '$NVCC -o $O/conjugateGradientPrecond main.cpp -lcublas -lcusparse'
}

opencl() {
  one cl_enumopencl       'gcc -O2 $CLDEF -o $O/enumopencl main.c -lOpenCL'
  one cl_copybuffer       'g++ -O2 -std=c++17 $CLHPP -o $O/copybuffer main.cpp -lOpenCL'
  one cl_copybufferkernel 'g++ -O2 -std=c++17 $CLHPP -o $O/copybufferkernel main.cpp -lOpenCL'
  # HandsOnOpenCL: the programs read their kernels from "../NAME.cl", so each
  # lands in OUT/NAME/C/ with its kernels in OUT/NAME/ (the repository's layout).
  one hoocl_deviceinfo 'mkdir -p $O/C; gcc -std=c99 -O2 -I$HC -o $O/C/DeviceInfo DeviceInfo.c -lOpenCL'
  one hoocl_vadd       'mkdir -p $O/C; gcc -O3 -DDEVICE=CL_DEVICE_TYPE_DEFAULT -I$HC -o $O/C/vadd vadd_c.c $HC/wtime.c $HC/device_info.c -lm -lOpenCL'
  one hoocl_vadd_chain 'mkdir -p $O/C; gcc -O3 -DDEVICE=CL_DEVICE_TYPE_DEFAULT -I$HC -o $O/C/vadd_chain vadd_chain.c $HC/wtime.c $HC/device_info.c -lm -lOpenCL'
  one hoocl_vadd_abc   'mkdir -p $O/C; gcc -O3 -DDEVICE=CL_DEVICE_TYPE_DEFAULT -I$HC -o $O/C/vadd_abc vadd_abc.c $HC/wtime.c $HC/device_info.c -lm -lOpenCL'
  one hoocl_matmul     'mkdir -p $O/C; cp *.cl $O/; gcc -O3 -std=c99 -ffast-math -I$HC -o $O/C/mult matmul.c matrix_lib.c $HC/wtime.c -lm -lOpenCL -fopenmp'
  one hoocl_pi         'mkdir -p $O/C; cp *.cl $O/; gcc -O3 -std=c99 -I$HC -o $O/C/pi_ocl pi_ocl.c $HC/wtime.c $HC/device_info.c -lm -lOpenCL -fopenmp'
  one hoocl_pi_vocl    'mkdir -p $O/C; cp *.cl $O/; gcc -g -std=c99 -DDEVICE=CL_DEVICE_TYPE_DEFAULT -I$HC -o $O/C/pi_vocl pi_vocl.c $HC/wtime.c -lOpenCL -fopenmp -lm'
}

python() { # nothing to compile: each program's sources are copied, so a run can write beside them
  for d in "$C"/cupy_* "$C"/torch_* "$C"/jax_*; do
    n=$(basename "$d"); one "$n" 'cp -r . $O/'
  done
}

export NVCC FATBIN CLDEF CLHPP HC
for g in $GROUPS_; do $g; done
wait
echo "built: $(ls "$B"/*/BUILD_OK 2>/dev/null | wc -l) programs in $B"
