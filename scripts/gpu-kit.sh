#!/usr/bin/env bash
# Packs what scripts/gpu-validate.sh needs into a kit that runs on a GPU
# machine without Pacer's build dependencies (a CUDA image with the driver,
# the toolkit or NVIDIA's pip wheels, but no Debian -dev packages and no
# network): the CUDA build's pacer-worker, libpacer_worker_gpu.so,
# pacer-gpu-smoke and pacer (debug info stripped), jq, every shared library
# they load except glibc's and CUDA's (those must match the machine's
# driver, so the kit takes the machine's), gpu-validate.sh, the job files of
# tests/testdata/gpu, the commit it was built from, and run.sh
# (scripts/gpu-kit-run.sh), which finds the machine's CUDA libraries and
# runs the validation. Building on the GPU machine instead needs the Debian
# packages of scripts/install-deps.sh there; the kit saves that and the
# build's minutes.
#
# Usage: scripts/gpu-kit.sh [BUILD_DIR (build)] [OUT (gpu-kit.tar.xz)]
#   OUT ending in .tar.xz: an archive holding the folder gpu-kit/ (about
#   11 MB); anything else: the kit's folder itself, which must be new or
#   an older kit (it is replaced whole).
# On the GPU machine: tar xJf gpu-kit.tar.xz && gpu-kit/run.sh [OUT_DIR]
#   (gpu-kit/run.sh --check only checks that everything loads).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=${2:-gpu-kit.tar.xz}

die() { echo "gpu-kit: $*" >&2; exit 2; }
# The folder form replaces OUT whole, so OUT must be new or an older kit.
case $out in
  *.tar.xz) ;;
  *) if [ -e "$out" ] && ! { [ -f "$out/VERSION" ] && [ -f "$out/run.sh" ]; }; then
       die "$out exists and is not a kit: name a new folder or a .tar.xz file"
     fi ;;
esac
bins=("$build/worker/pacer-worker" "$build/worker/libpacer_worker_gpu.so"
      "$build/worker/pacer-gpu-smoke" "$build/controller/pacer")
for f in "${bins[@]}"; do
  [ -f "$f" ] || die "$f missing: build with CUDA first (scripts/build.sh on a machine with nvcc)"
done
jq=$(command -v jq) || die "jq missing (gpu-validate.sh reads plans with it): apt-get install jq"
ldd "$build/worker/libpacer_worker_gpu.so" | grep -q libcudnn ||
  echo "gpu-kit: warning: built without cuDNN; the GPU runs only the tiled fused attention" >&2

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
kit=$stage/gpu-kit
mkdir -p "$kit/build/worker" "$kit/build/controller" "$kit/bin" "$kit/lib" "$kit/scripts" \
  "$kit/tests/testdata/gpu"
for f in "${bins[@]}"; do
  dst=$kit/build/${f#"$build"/}
  cp "$f" "$dst"
  strip --strip-debug "$dst"
done
cp "$jq" "$kit/bin/jq"

# The machine supplies these: glibc (the kit's binaries need glibc 2.36 or
# newer there) and CUDA's libraries, which must match its driver.
machine_lib='^(ld-linux.*|libc|libm|libdl|libpthread|librt|libresolv|libcuda|libcudart|libcublas|libcublasLt|libnccl|libcudnn.*|libnvrtc.*|libnvJitLink)\.so'
elves=("$kit"/build/worker/* "$kit/build/controller/pacer" "$kit/bin/jq")
deps=$(ldd "${elves[@]}")
missing=$(grep "not found" <<<"$deps" || true)
[ -z "$missing" ] || die "libraries not found here: $missing"
# GCC's runtime goes to lib/cxx, which run.sh puts on the path only where
# the machine's own libstdc++ is older than this one needs: a newer one
# must win there, or tools built against it (compute-sanitizer) fail.
mkdir -p "$kit/lib/cxx"
cxx_lib='^(libstdc\+\+|libgcc_s)\.so'
while read -r path; do
  name=$(basename "$path")
  if [[ $name =~ $cxx_lib ]]; then cp -L "$path" "$kit/lib/cxx/$name"
  elif ! [[ $name =~ $machine_lib ]]; then cp -L "$path" "$kit/lib/$name"; fi
done < <(sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p' <<<"$deps" | sort -u)
# The libstdc++ versions the kit's binaries and libraries ask for.
for f in "${elves[@]}" "$kit"/lib/*.so*; do
  objdump -T "$f" | grep -o 'GLIBCXX_[0-9.]*[0-9]\|CXXABI_[0-9.]*[0-9]' || true
done | sort -u >"$kit/lib/cxx/needs"

cp scripts/gpu-validate.sh "$kit/scripts/"
cp scripts/gpu-kit-run.sh "$kit/run.sh"
cp tests/testdata/gpu/*.yaml "$kit/tests/testdata/gpu/"
{
  echo "commit $(git rev-parse HEAD 2>/dev/null || echo unknown)$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(sed -n "s/^PRETTY_NAME=\"*\([^\"]*\)\"*/\1/p" /etc/os-release)"
  echo "cuda $(cat "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null |
    sed -n 's/^set(CMAKE_CUDA_COMPILER_VERSION "\(.*\)")/\1/p' | head -1)"
} >"$kit/VERSION"

case $out in
  *.tar.xz) tar -cJf "$out" -C "$stage" gpu-kit ;;
  *) rm -rf "$out" && mkdir -p "$(dirname "$out")" && cp -a "$kit" "$out" ;;
esac
echo "gpu-kit: wrote $out ($(du -sh "$out" | cut -f1)); $(head -1 "$kit/VERSION")"
