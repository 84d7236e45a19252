#!/usr/bin/env bash
# scripts/gpu-kit.sh packs the CUDA build for a GPU machine that has only
# glibc and CUDA's libraries: checks that the kit holds every other library
# its binaries load (resolved from the kit's lib/ first, nothing may come
# from this machine's system folders), none of CUDA's or glibc's, and that
# its run.sh --check loads everything and plans each job file; and that a
# build without the CUDA binaries is refused with a clear message.
#   gpu_kit_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$src/scripts/gpu-kit.sh" "$build" "$tmp/kit" >"$tmp/make.log" 2>&1 ||
  { cat "$tmp/make.log" >&2; fail "gpu-kit.sh exited non-zero"; }
kit=$tmp/kit
for f in build/worker/pacer-worker build/worker/libpacer_worker_gpu.so build/worker/pacer-gpu-smoke \
  build/controller/pacer bin/jq run.sh scripts/gpu-validate.sh VERSION; do
  [ -e "$kit/$f" ] || fail "kit lacks $f"
done
ls "$kit"/tests/testdata/gpu/*.yaml >/dev/null || fail "kit lacks the job files"
grep -q "^commit [0-9a-f]\{40\}" "$kit/VERSION" || fail "VERSION names no commit: $(cat "$kit/VERSION")"

# glibc and CUDA come from the GPU machine (CUDA must match its driver).
machine='^(ld-linux.*|libc|libm|libdl|libpthread|librt|libresolv|libcuda|libcudart|libcublas|libcublasLt|libnccl|libcudnn.*|libnvrtc.*|libnvJitLink)\.so'
for f in "$kit"/lib/*; do
  [[ $(basename "$f") =~ $machine ]] && fail "kit carries the machine's library $(basename "$f")"
done

# Every other dependency resolves inside the kit: with lib/ first on the
# path, one that resolves elsewhere is one the kit forgot.
cuda_dir=$(dirname "$(ldd "$build/worker/pacer-gpu-smoke" | sed -n 's/.*libcudart[^ ]* => \(\/[^ ]*\) .*/\1/p')")
# (GCC's runtime is in lib/cxx, which run.sh uses where the machine's is older.)
[ -e "$kit/lib/cxx/libstdc++.so.6" ] || fail "kit lacks GCC's runtime in lib/cxx"
grep -q "^GLIBCXX_3\.4\.[0-9]*$" "$kit/lib/cxx/needs" || fail "lib/cxx/needs lists no GLIBCXX version"
for f in "$kit"/build/worker/* "$kit/build/controller/pacer" "$kit/bin/jq"; do
  LD_LIBRARY_PATH="$kit/lib:$kit/lib/cxx:$cuda_dir" ldd "$f" >"$tmp/ldd"
  ! grep "not found" "$tmp/ldd" || fail "$(basename "$f") has unresolved libraries"
  while read -r name path; do
    [[ $name =~ $machine ]] && continue
    case $(dirname "$path") in "$kit/lib" | "$kit/lib/cxx") ;;
      *) fail "$(basename "$f") loads $name from $path, not from the kit" ;; esac
  done < <(sed -n 's/^[[:space:]]*\([^ ]*\) => \(\/[^ ]*\) .*/\1 \2/p' "$tmp/ldd")
done

# run.sh finds CUDA's libraries, loads everything and plans every job.
PACER_CUDA_LIB_DIRS=$cuda_dir "$kit/run.sh" --check >"$tmp/check.log" 2>&1 ||
  { cat "$tmp/check.log" >&2; fail "run.sh --check exited non-zero"; }
for job in "$kit"/tests/testdata/gpu/*.yaml; do
  grep -q "$(basename "$job"): {\"gpuType\"" "$tmp/check.log" ||
    { cat "$tmp/check.log" >&2; fail "run.sh --check printed no plan for $(basename "$job")"; }
done
grep -q "libcudart.so.13 from $cuda_dir/" "$tmp/check.log" || fail "run.sh did not report where CUDA's runtime is"
# This machine's libstdc++ built the kit, so it has every version: run.sh
# keeps it. A kit that needs a version it lacks takes its own.
grep -q "^gpu-kit: libstdc++ from /" "$tmp/check.log" || fail "run.sh did not keep this machine's libstdc++"
echo GLIBCXX_3.4.999 >>"$kit/lib/cxx/needs"
sort -o "$kit/lib/cxx/needs" "$kit/lib/cxx/needs"
PACER_CUDA_LIB_DIRS=$cuda_dir "$kit/run.sh" --check >"$tmp/check2.log" 2>&1 ||
  { cat "$tmp/check2.log" >&2; fail "run.sh --check with the kit's libstdc++ exited non-zero"; }
grep -q "^gpu-kit: libstdc++ from the kit" "$tmp/check2.log" || fail "run.sh did not take the kit's libstdc++"

# A build without the CUDA binaries: exit 2 and what to do.
mkdir -p "$tmp/nocuda/worker" "$tmp/nocuda/controller"
set +e
"$src/scripts/gpu-kit.sh" "$tmp/nocuda" "$tmp/kit2" >"$tmp/nocuda.log" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || fail "a build without CUDA: exit $rc, want 2"
grep -q "build with CUDA first" "$tmp/nocuda.log" || fail "no advice: $(cat "$tmp/nocuda.log")"
# Writing the kit's folder over an existing folder that is not a kit (a
# slip such as `gpu-kit.sh build build`) is refused and deletes nothing;
# an older kit is replaced.
mkdir -p "$tmp/precious" && echo keep >"$tmp/precious/file"
set +e
"$src/scripts/gpu-kit.sh" "$build" "$tmp/precious" >"$tmp/precious.log" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || fail "writing over a folder that is not a kit: exit $rc, want 2"
[ -e "$tmp/precious/file" ] || fail "gpu-kit.sh deleted a folder that was not a kit"
grep -q "not a kit" "$tmp/precious.log" || fail "no reason given: $(cat "$tmp/precious.log")"
"$src/scripts/gpu-kit.sh" "$build" "$kit" >/dev/null 2>&1 || fail "an older kit was not replaced"
echo "gpu kit: self-contained, $(find "$kit/lib" -name "*.so*" | wc -l) libraries, run.sh --check passed"
