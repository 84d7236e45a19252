# syntax=docker/dockerfile:1
# The pacer-worker image, published as ghcr.io/pacer-dev/pacer-worker:<version>:
# the training-step program the controller's worker pods run
# (`pacer-worker run`), with both backends: CPU (OpenBLAS, Gloo) and GPU
# (CUDA, cuBLAS, NCCL; the plugin libpacer_worker_gpu.so beside the program).
# Build from the repository root (docs/images.md):
#   docker build -f docker/worker.Dockerfile -t ghcr.io/pacer-dev/pacer-worker:0.1.0 .
# tests/docker/dockerfile_check.sh checks this file.
#
# Base images: NVIDIA's CUDA images, tag format <major>.<minor>.<patch>-
# {devel,runtime}-ubuntu24.04. 13.0.2 is CUDA 13.0 Update 2, whose nvcc
# (V13.0.88) is the one the project is developed against at /usr/local/cuda.
# The devel image carries nvcc, the CUDA headers, cuBLAS and NCCL's headers
# (libnccl-dev); the runtime image the shared libraries: cudart, cuBLAS and
# NCCL (libnccl2), installed and held at versions built for this CUDA release
# by NVIDIA. Both are Ubuntu 24.04 (noble): package names below are Ubuntu's.
# cuDNN (the fused attention of bf16 plans, worker/gpu/cudnn_attention.h)
# comes from NVIDIA's CUDA apt repository, which both images have configured:
# libcudnn9-dev-cuda-13 to build, libcudnn9-cuda-13 to run, the newest 9.x
# (the SDPA forward needs 9.13 or newer, the backward 9.17; with less the
# worker logs it and runs the tiled attention for what is missing).

# The project version (CMakeLists.txt, project(pacer VERSION ...)).
ARG PACER_VERSION=0.1.0
ARG CUDA_IMAGE_VERSION=13.0.2

# --- build -----------------------------------------------------------------
FROM nvidia/cuda:${CUDA_IMAGE_VERSION}-devel-ubuntu24.04 AS build
ARG DEBIAN_FRONTEND=noninteractive
# The -dev packages of scripts/install-deps.sh, by their Ubuntu 24.04 names
# (identical to Debian 12's for these; Gloo, CLI11 and cpprestsdk come from
# noble's universe component, enabled in the base image). The top-level
# CMakeLists.txt configures every component, so the controller's cpprestsdk,
# OpenSSL and spdlog are needed to configure although only the worker is
# built. Noble's cmake is 3.28 (the project needs 3.25).
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config \
      libyaml-cpp-dev nlohmann-json3-dev libcli11-dev \
      libgloo-dev libopenblas-dev prometheus-cpp-dev \
      libcpprest-dev libssl-dev libspdlog-dev \
      libcudnn9-dev-cuda-13 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY cmake cmake
COPY planner planner
COPY controller controller
COPY worker worker
COPY data data
# CUDA on: worker/CMakeLists.txt finds /usr/local/cuda/bin/nvcc and builds the
# GPU plugin for sm_80 and sm_90; PACER_REQUIRE_CUDNN fails the build if
# cuDNN is not found rather than shipping a plugin without it. PACER_WERROR=OFF: noble's GCC 13 is newer
# than the GCC 12 CI enforces warnings with, and a new warning there must not
# break the image. RelWithDebInfo is the level the tests run; symbols are
# stripped from the copies that ship.
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPACER_ENABLE_CUDA=ON \
      -DPACER_REQUIRE_CUDNN=ON \
      -DPACER_WERROR=OFF -DPACER_BUILD_TESTS=OFF -DPACER_BUILD_BENCHMARKS=OFF \
 && cmake --build build --target pacer-worker pacer_worker_gpu_plugin -j"$(nproc)" \
 && mkdir -p /out \
 && strip --strip-unneeded -o /out/pacer-worker build/worker/pacer-worker \
 && strip --strip-unneeded -o /out/libpacer_worker_gpu.so build/worker/libpacer_worker_gpu.so

# --- runtime ---------------------------------------------------------------
FROM nvidia/cuda:${CUDA_IMAGE_VERSION}-runtime-ubuntu24.04
ARG PACER_VERSION
ARG DEBIAN_FRONTEND=noninteractive
LABEL org.opencontainers.image.title="pacer-worker" \
      org.opencontainers.image.description="Pacer's training-step program: pacer-worker run and calibrate, on GPUs (CUDA, NCCL) or CPUs (OpenBLAS, Gloo)" \
      org.opencontainers.image.source="https://github.com/pacer-dev/pacer" \
      org.opencontainers.image.licenses="NOASSERTION" \
      org.opencontainers.image.version="${PACER_VERSION}"
# One package per library in `ldd pacer-worker` (Ubuntu 24.04 names; libc6,
# libgcc-s1, libstdc++6 and zlib1g are in the base image). Their own
# dependencies (libcivetweb1, libhiredis, libibverbs1, libgfortran5) come with
# them.
#   libprometheus-cpp-{pull,core}.so.1.0   libprometheus-cpp-pull1.0 (/metrics)
#   libgloo.so.0                           libgloo0 (CPU collectives, rendezvous store)
#   libopenblas.so.0                       libopenblas0-pthread (CPU GEMMs)
#   libyaml-cpp.so.0.8                     libyaml-cpp0.8 (noble's yaml-cpp; Debian 12
#                                          has 0.7): the planner library links it, and
#                                          whether the linker keeps it depends on the
#                                          build type (the Debug ASan build keeps it)
#   libcudnn.so.9                          libcudnn9-cuda-13 (NVIDIA's repository)
# The GPU plugin's CUDA libraries are the runtime image's own; the loop below
# fails the build if one is missing rather than a GPU pod at its first step.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libprometheus-cpp-pull1.0 libprometheus-cpp-core1.0 libgloo0 libopenblas0-pthread \
      libyaml-cpp0.8 libcudnn9-cuda-13 \
 && rm -rf /var/lib/apt/lists/* \
 && for so in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do \
      ldconfig -p | grep -qF "$so" || { echo "runtime image lacks $so" >&2; exit 1; }; \
    done
# pacer-worker loads the GPU plugin from its own directory (worker/app/backend_choice.cc).
COPY --from=build /out/pacer-worker /usr/local/bin/pacer-worker
COPY --from=build /out/libpacer_worker_gpu.so /usr/local/bin/libpacer_worker_gpu.so
# The uid/gid the controller's worker pods run as (controller/daemon/worker_pods.cc).
USER 65532:65532
# Rendezvous (the master's TCP store) and /metrics: the pod template's ports.
EXPOSE 29500 9400
ENTRYPOINT ["/usr/local/bin/pacer-worker"]
