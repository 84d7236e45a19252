# syntax=docker/dockerfile:1
# The pacer-controller image, published as ghcr.io/pacer-dev/pacer-controller:<version>.
# Build from the repository root (docs/images.md):
#   docker build -f docker/controller.Dockerfile -t ghcr.io/pacer-dev/pacer-controller:0.1.0 .
# tests/docker/dockerfile_check.sh checks this file: COPY sources, build
# targets, the runtime packages against `ldd pacer-controller`, the user and
# the version label.

# The project version (CMakeLists.txt, project(pacer VERSION ...)); the test
# fails when the two differ.
ARG PACER_VERSION=0.1.0

# --- build: Debian 12, the distribution the project is developed and tested on
FROM debian:bookworm AS build
ARG DEBIAN_FRONTEND=noninteractive
# The -dev packages of scripts/install-deps.sh that configuring the project
# needs. The top-level CMakeLists.txt configures every component, so the
# worker's Gloo, OpenBLAS and prometheus-cpp headers are needed to configure
# even though only pacer-controller is built. No test or benchmark packages:
# tests are off.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential cmake pkg-config \
      libyaml-cpp-dev nlohmann-json3-dev libcli11-dev \
      libcpprest-dev libssl-dev libspdlog-dev prometheus-cpp-dev \
      libgloo-dev libopenblas-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what CMake reads: the .dockerignore allow-list keeps build trees,
# .git and local state out of the context.
COPY CMakeLists.txt ./
COPY cmake cmake
COPY planner planner
COPY controller controller
COPY worker worker
COPY data data
# RelWithDebInfo is the optimisation level the test suite runs; the debug
# information is stripped from the copy that ships. Warnings stay errors:
# this is the compiler CI uses.
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DPACER_ENABLE_CUDA=OFF -DPACER_BUILD_TESTS=OFF -DPACER_BUILD_BENCHMARKS=OFF \
 && cmake --build build --target pacer-controller -j"$(nproc)" \
 && mkdir -p /out \
 && strip --strip-unneeded -o /out/pacer-controller build/controller/daemon/pacer-controller

# --- runtime: Debian 12 slim with the shared libraries pacer-controller loads
FROM debian:bookworm-slim
ARG PACER_VERSION
ARG DEBIAN_FRONTEND=noninteractive
LABEL org.opencontainers.image.title="pacer-controller" \
      org.opencontainers.image.description="Plans, launches, watches and re-plans TrainJobs (pacer.dev/v1alpha1) so they finish by their deadline" \
      org.opencontainers.image.source="https://github.com/pacer-dev/pacer" \
      org.opencontainers.image.licenses="NOASSERTION" \
      org.opencontainers.image.version="${PACER_VERSION}"
# One package per library in `ldd pacer-controller` (Debian 12 names; the
# libraries of libc6, libgcc-s1, libstdc++6 and zlib1g are already in slim):
#   libcpprest.so.2.10                 libcpprest2.10   (Kubernetes and Prometheus HTTP)
#   libssl.so.3, libcrypto.so.3        libssl3          (TLS to the API server)
#   libprometheus-cpp-core.so.1.0      libprometheus-cpp-core1.0 (/metrics)
#   libcivetweb.so.1                   libcivetweb1     (the /metrics and probe server)
#   libspdlog.so.1.10, libfmt.so.9     libspdlog1.10, libfmt9    (logs)
#   libyaml-cpp.so.0.7                 libyaml-cpp0.7   (kubeconfig, TrainJob documents)
#   libbrotli{dec,enc,common}.so.1     libbrotli1       (cpprestsdk's compression)
# ca-certificates: the system trust store, for a Prometheus or API server
# reached over HTTPS with a public certificate.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libcpprest2.10 libssl3 libprometheus-cpp-core1.0 libcivetweb1 libspdlog1.10 libfmt9 \
      libyaml-cpp0.7 libbrotli1 zlib1g ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /out/pacer-controller /usr/local/bin/pacer-controller
# The uid/gid the worker pods run as (controller/daemon/worker_pods.cc) and
# distroless's "nonroot"; numeric, so that Kubernetes' runAsNonRoot can verify
# it without an /etc/passwd entry.
USER 65532:65532
# --metrics-port and --health-probe-port defaults (docs/controller.md).
EXPOSE 8080 8081
ENTRYPOINT ["/usr/local/bin/pacer-controller"]
