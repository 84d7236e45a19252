#!/usr/bin/env bash
# run.sh of a GPU kit (scripts/gpu-kit.sh): on a GPU machine, finds the
# machine's CUDA libraries (the toolkit's folders, then NVIDIA's pip wheels
# under /opt and /usr), checks that every binary of the kit loads, and runs
# the kit's scripts/gpu-validate.sh on its binaries.
# Usage: gpu-kit/run.sh [--check] [OUT_DIR (./gpu-validate-out)]
#   --check: only check that everything loads and plans (exit 0), without a
#            GPU too; the smoke then reports "no GPU" (exit 77), not a failure.
#   PACER_CUDA_LIB_DIRS (colon-separated) is searched before the defaults.
set -uo pipefail
kit=$(cd "$(dirname "$0")" && pwd)
check=0
if [ "${1:-}" = --check ]; then check=1; shift; fi
out=${1:-$PWD/gpu-validate-out}
case $out in /*) ;; *) out=$PWD/$out ;; esac
cat "$kit/VERSION"

# One folder per library, the first found: a toolkit's libraries and the
# wheels' (nvidia/cu13/lib, nvidia/nccl/lib, nvidia/cudnn/lib, ...) work alike.
dirs=$kit/lib${PACER_CUDA_LIB_DIRS:+:$PACER_CUDA_LIB_DIRS}
IFS=: read -ra preferred <<<"${PACER_CUDA_LIB_DIRS:-}"
for so in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libcudnn.so.9; do
  found=""
  for d in "${preferred[@]}"; do [ -e "$d/$so" ] && found=$d/$so && break; done
  [ -n "$found" ] || found=$(find /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda*/ \
    /opt /usr/lib /usr/local/lib -name "$so" -print -quit 2>/dev/null)
  if [ -n "$found" ]; then
    echo "gpu-kit: $so from $found"
    case ":$dirs:" in *":$(dirname "$found"):"*) ;; *) dirs=$dirs:$(dirname "$found") ;; esac
  fi
done
# GCC's runtime: the machine's where it has every version the kit needs
# (tools built against a newer one, such as compute-sanitizer, need it),
# else the kit's.
system_cxx=$(ldconfig -p 2>/dev/null | sed -n 's/.*libstdc++\.so\.6 (libc6,x86-64) => //p' | head -1)
if [ -n "$system_cxx" ] &&
  [ -z "$(grep -a -o 'GLIBCXX_[0-9.]*[0-9]\|CXXABI_[0-9.]*[0-9]' "$system_cxx" | sort -u |
    comm -13 - "$kit/lib/cxx/needs")" ]; then
  echo "gpu-kit: libstdc++ from $system_cxx"
else
  echo "gpu-kit: libstdc++ from the kit (the machine's is missing or older)"
  dirs=$dirs:$kit/lib/cxx
fi
export LD_LIBRARY_PATH=$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PATH=$kit/bin:$PATH:/usr/local/cuda/bin

missing=""
for f in "$kit"/build/worker/* "$kit/build/controller/pacer" "$kit/bin/jq"; do
  m=$(ldd "$f" 2>&1 | grep "not found")
  [ -z "$m" ] || missing+="$(basename "$f"):$m"$'\n'
done
if [ -n "$missing" ]; then
  printf 'gpu-kit: libraries not found:\n%s' "$missing"
  echo "gpu-kit: for CUDA's libraries set PACER_CUDA_LIB_DIRS to the folders that hold them;"
  echo "gpu-kit: the others belong in the kit: rebuild it with scripts/gpu-kit.sh"
  exit 2
fi

if [ "$check" = 1 ]; then
  rc=0
  for job in "$kit"/tests/testdata/gpu/*.yaml; do
    plan=$("$kit/build/controller/pacer" plan "$job" -o json | jq -c .plan) || rc=1
    echo "gpu-kit: $(basename "$job"): ${plan:-no plan}"
  done
  "$kit/build/worker/pacer-worker" --help >/dev/null || rc=1
  "$kit/build/worker/pacer-gpu-smoke" >/dev/null 2>&1
  smoke=$?
  echo "gpu-kit: pacer-gpu-smoke exit $smoke (0: passed, 77: no GPU here)"
  [ "$smoke" = 0 ] || [ "$smoke" = 77 ] || rc=1
  exit $rc
fi
exec "$kit/scripts/gpu-validate.sh" "$kit/build" "$out"
