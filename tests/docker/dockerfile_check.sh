#!/usr/bin/env bash
# Checks one of docker/*.Dockerfile without a Docker engine (none exists on
# the development and CI machines), so that an image build cannot be the
# first place a mistake shows:
#   - every COPY source from the build context exists and is allowed by the
#     .dockerignore allow-list; every COPY --from source is a path that an
#     earlier stage's RUN writes; no ADD (it fetches URLs and unpacks archives);
#   - each build stage that runs `cmake -S` configures from just the files
#     its COPYs bring (as .dockerignore lets them through): a file CMake
#     reads at configure time that no COPY brings fails here, not in the
#     image build (skipped with --skip-configure or without cmake);
#   - every `cmake --target` is a target the project declares, and every path
#     read from a stage's build tree is where CMake puts that target's output
#     (compared with the real build when --binary is given);
#   - every FROM names an explicit tag, the final stage is no -devel image,
#     installs no compiler or -dev package and runs as a numeric non-root USER;
#     the ENTRYPOINT is a file the final stage copies in;
#   - the version label equals the CMake project version, and the title,
#     source and licenses labels exist;
#   - the final stage's packages cover every shared library that `ldd` reports
#     for each --binary (libraries mapped to Debian packages with `dpkg -S`;
#     a package's own dependencies count as covered; libraries that no
#     package owns, such as CUDA's under /usr/local/cuda, must be named in
#     the final stage, which asserts their presence); skipped with a message
#     when a binary is not built;
#   - the image repository is named in the Dockerfile, and the chart
#     (charts/pacer/values.yaml, when present) uses the same repositories.
#
# Usage: dockerfile_check.sh --source-dir DIR --dockerfile FILE --image REPO
#            [--distro debian|ubuntu] [--build-dir DIR] [--binary PATH]...
#            [--values FILE] [--skip-configure]
# Exit status: 0 when every check passed (skips allowed), 1 otherwise.
set -uo pipefail

source_dir="" dockerfile="" image="" distro="debian" build_dir="" values=""
binaries=()
configure=1
while [ $# -gt 0 ]; do
  case "$1" in
    --source-dir) source_dir="$2"; shift 2 ;;
    --dockerfile) dockerfile="$2"; shift 2 ;;
    --image) image="$2"; shift 2 ;;
    --distro) distro="$2"; shift 2 ;;
    --build-dir) build_dir="$2"; shift 2 ;;
    --binary) binaries+=("$2"); shift 2 ;;
    --values) values="$2"; shift 2 ;;
    --skip-configure) configure=0; shift ;;
    *) echo "dockerfile_check: unknown argument $1" >&2; exit 2 ;;
  esac
done
if [ -z "$source_dir" ] || [ -z "$dockerfile" ] || [ -z "$image" ]; then
  echo "usage: $0 --source-dir DIR --dockerfile FILE --image REPO [...]" >&2
  exit 2
fi
[ -n "$values" ] || values="$source_dir/charts/pacer/values.yaml"

passed=0 failed=0 skipped=0
ok() { passed=$((passed + 1)); echo "ok   - $*"; }
fail() { failed=$((failed + 1)); echo "FAIL - $*"; }
skip() { skipped=$((skipped + 1)); echo "skip - $*"; }
# check CONDITION-EXIT-STATUS MESSAGE
check() { if [ "$1" -eq 0 ]; then ok "$2"; else fail "$2"; fi; }

name=$(basename "$dockerfile")
echo "# $name"

# --- parse the Dockerfile into instructions ----------------------------------
# Comment lines are dropped (also inside a continued RUN, as Docker does) and
# backslash continuations joined. Per instruction: its stage index, keyword
# and arguments.
ins_stage=() ins_kw=() ins_args=()
stage_from=() stage_name=()
declare -A global_args=()
stage=-1 current=""
flush() {
  [ -n "$current" ] || return 0
  local kw="${current%%[[:space:]]*}" args=""
  kw="${kw^^}"
  [[ "$current" == *[[:space:]]* ]] && args="${current#*[[:space:]]}"
  args="${args#"${args%%[![:space:]]*}"}"
  if [ "$kw" = "FROM" ]; then
    stage=$((stage + 1))
    read -r -a from_words <<< "$args"
    local from_image="" as=""
    for ((w = 0; w < ${#from_words[@]}; w++)); do
      case "${from_words[w]}" in
        --*) ;;
        [Aa][Ss]) as="${from_words[w + 1]:-}"; break ;;
        *) [ -z "$from_image" ] && from_image="${from_words[w]}" ;;
      esac
    done
    stage_from[stage]="$from_image"
    stage_name[stage]="$as"
  elif [ "$kw" = "ARG" ] && [ "$stage" -lt 0 ]; then
    local arg_name="${args%%=*}"
    global_args[$arg_name]="$([[ "$args" == *=* ]] && echo "${args#*=}")"
  fi
  ins_stage+=("$stage"); ins_kw+=("$kw"); ins_args+=("$args")
  current=""
}
while IFS= read -r line || [ -n "$line" ]; do
  [[ "$line" =~ ^[[:space:]]*# ]] && continue
  [[ "$line" =~ ^[[:space:]]*$ ]] && [ -z "$current" ] && continue
  if [[ "$line" =~ \\[[:space:]]*$ ]]; then
    current+="${line%\\*} "
    continue
  fi
  current+="$line"
  flush
done < "$dockerfile"
flush
final=$stage
if [ "$final" -lt 0 ]; then
  fail "$name has no FROM"
  echo "$passed passed, $failed failed, $skipped skipped"
  exit 1
fi

# ARG values visible in a stage: a global ARG redeclared without a default
# keeps the global default; a stage ARG with a default overrides it.
resolve() {  # resolve STAGE TEXT: substitutes ${NAME} and $NAME
  local st="$1" text="$2" i n v
  declare -A vars=()
  for n in "${!global_args[@]}"; do vars[$n]="${global_args[$n]}"; done
  for ((i = 0; i < ${#ins_kw[@]}; i++)); do
    [ "${ins_stage[i]}" = "$st" ] && [ "${ins_kw[i]}" = "ARG" ] || continue
    n="${ins_args[i]%%=*}"
    if [[ "${ins_args[i]}" == *=* ]]; then vars[$n]="${ins_args[i]#*=}"; fi
  done
  for n in "${!vars[@]}"; do
    v="${vars[$n]}"
    text="${text//\$\{$n\}/$v}"
    text="${text//\$$n/$v}"
  done
  printf '%s' "$text"
}

# Text of all RUN instructions of one stage.
stage_runs() {
  local i
  for ((i = 0; i < ${#ins_kw[@]}; i++)); do
    [ "${ins_stage[i]}" = "$1" ] && [ "${ins_kw[i]}" = "RUN" ] && printf '%s\n' "${ins_args[i]}"
  done
  return 0
}
# Whitespace-separated words of a text, one per line.
words() { tr -s ' \t' '\n' <<< "$1" | sed '/^$/d'; }

# --- project facts -------------------------------------------------------------
project_version=$(sed -n 's/^project(pacer VERSION \([0-9][0-9.]*\).*/\1/p' \
                  "$source_dir/CMakeLists.txt" | head -n1)
# Targets and where their outputs go: "<source-relative dir> <target> <file>",
# from every add_executable/add_library/add_custom_target (and an
# OUTPUT_NAME set with set_target_properties in the same file).
target_table=$(
  cd "$source_dir" || exit 1
  find . -name CMakeLists.txt -not -path './build*' -not -path './.git/*' | sort |
    xargs awk '
      FNR == 1 { if (NR > 1) emit(); file = FILENAME; text = "" }
      { text = text " " $0 }
      END { if (NR > 0) emit() }
      function emit(   dir, rest, decl, kind, tgt, type, w, out, props, file_name) {
        dir = file; sub(/^\.\//, "", dir); sub(/\/?CMakeLists\.txt$/, "", dir)
        if (dir == "") dir = "."
        rest = text
        while (match(rest, /add_(executable|library|custom_target)\([ \t]*[A-Za-z0-9_.+:-]+([ \t]+[A-Z]+)?/)) {
          decl = substr(rest, RSTART, RLENGTH); rest = substr(rest, RSTART + RLENGTH)
          kind = decl; sub(/\(.*/, "", kind); sub(/^add_/, "", kind)
          sub(/^[^(]*\([ \t]*/, "", decl)
          split(decl, w, /[ \t]+/); tgt = w[1]; type = w[2]
          out = tgt
          props = text
          if (match(props, "set_target_properties\\([ \t]*" tgt "[ \t]+PROPERTIES[^)]*OUTPUT_NAME[ \t]+[A-Za-z0-9_.-]+")) {
            props = substr(props, RSTART, RLENGTH); sub(/.*OUTPUT_NAME[ \t]+/, "", props); out = props
          }
          if (kind == "executable") file_name = out
          else if (kind == "library" && (type == "MODULE" || type == "SHARED")) file_name = "lib" out ".so"
          else if (kind == "library" && type != "INTERFACE") file_name = "lib" out ".a"
          else file_name = "-"
          print dir, tgt, file_name
        }
      }'
)

# --- FROM: explicit tags ----------------------------------------------------
for ((s = 0; s <= final; s++)); do
  from=$(resolve "$s" "${stage_from[s]}")
  ref="${from##*/}"
  if [[ "$ref" == *:* ]] && [[ "${ref##*:}" != "latest" ]]; then
    ok "stage $s base image $from has an explicit tag"
  else
    fail "stage $s base image $from has no explicit tag (or :latest)"
  fi
done
final_from=$(resolve "$final" "${stage_from[final]}")
[[ "$final_from" != *devel* ]]
check $? "final stage base $final_from is not a -devel image"

# --- COPY and ADD -------------------------------------------------------------
# The .dockerignore allow-list: '*' first, then '!path' entries.
dockerignore="$source_dir/.dockerignore"
allowed=()
allow_list=0
if [ -f "$dockerignore" ]; then
  first=$(grep -vE '^[[:space:]]*(#|$)' "$dockerignore" | head -n1)
  [ "$first" = "*" ] && allow_list=1
  while IFS= read -r a; do allowed+=("${a%/}"); done \
    < <(grep -E '^!' "$dockerignore" | sed 's/^!//')
fi
context_allowed() {  # is a context path sent to the builder?
  local p="${1#./}" a
  p="${p%/}"
  [ "$allow_list" -eq 1 ] || return 0
  for a in "${allowed[@]}"; do
    [ "$p" = "$a" ] || [[ "$p" == "$a/"* ]] && return 0
  done
  return 1
}
stage_index() {  # stage_index NAME-OR-NUMBER BEFORE: index of an earlier stage
  local s
  for ((s = 0; s < $2; s++)); do
    [ "${stage_name[s]}" = "$1" ] || [ "$s" = "$1" ] && { echo "$s"; return 0; }
  done
  return 1
}
declare -A final_copied=()
for ((i = 0; i < ${#ins_kw[@]}; i++)); do
  kw="${ins_kw[i]}"
  if [ "$kw" = "ADD" ]; then
    fail "stage ${ins_stage[i]}: ADD ${ins_args[i]} (use COPY: ADD fetches URLs and unpacks archives)"
    continue
  fi
  [ "$kw" = "COPY" ] || continue
  if [[ "${ins_args[i]}" == \[* ]]; then
    fail "stage ${ins_stage[i]}: COPY in JSON form is not checked: ${ins_args[i]}"
    continue
  fi
  read -r -a cw <<< "${ins_args[i]}"
  from=""
  paths=()
  for w in "${cw[@]}"; do
    case "$w" in
      --from=*) from="${w#--from=}" ;;
      --*) ;;
      *) paths+=("$w") ;;
    esac
  done
  n=${#paths[@]}
  if [ "$n" -lt 2 ]; then
    fail "stage ${ins_stage[i]}: COPY ${ins_args[i]} has no destination"
    continue
  fi
  dest="${paths[n - 1]}"
  for ((p = 0; p < n - 1; p++)); do
    src="${paths[p]}"
    if [ -z "$from" ]; then
      if [ -e "$source_dir/$src" ]; then
        ok "COPY $src: exists in the repository"
      else
        fail "COPY $src: not in the repository"
      fi
      context_allowed "$src"
      check $? "COPY $src: allowed by .dockerignore"
    else
      if ! st=$(stage_index "$from" "${ins_stage[i]}"); then
        fail "COPY --from=$from $src: no earlier stage named $from"
        continue
      fi
      if grep -qxF -- "$src" <<< "$(words "$(stage_runs "$st")")"; then
        ok "COPY --from=$from $src: written by a RUN of stage $from"
      else
        fail "COPY --from=$from $src: no RUN of stage $from writes it"
      fi
    fi
    if [ "${ins_stage[i]}" = "$final" ]; then
      if [[ "$dest" == */ ]]; then final_copied["$dest$(basename "$src")"]=1
      else final_copied["$dest"]=1; fi
    fi
  done
done

# --- each build stage configures from what it copies ---------------------------
# Docker builds from the files a stage copies, not from the repository, so
# the stage's configure runs here in a folder holding only those: each
# COPY source (no --from) that exists and .dockerignore lets through, at its
# destination under the WORKDIR, build trees left out as .dockerignore
# leaves them. The RUN's -D options are kept except PACER_REQUIRE_CUDNN
# (whether this machine has cuDNN says nothing about the copied files).
# stage_context STAGE DIR: lays out in DIR what the stage's COPYs bring.
stage_context() {
  local st="$1" ctx="$2" i w src dest n p workdir=""
  for ((i = 0; i < ${#ins_kw[@]}; i++)); do
    [ "${ins_stage[i]}" = "$st" ] && [ "${ins_kw[i]}" = "WORKDIR" ] && workdir="${ins_args[i]%/}"
  done
  for ((i = 0; i < ${#ins_kw[@]}; i++)); do
    [ "${ins_stage[i]}" = "$st" ] && [ "${ins_kw[i]}" = "COPY" ] || continue
    [[ "${ins_args[i]}" == \[* ]] && continue
    read -r -a cw <<< "${ins_args[i]}"
    local from="" paths=()
    for w in "${cw[@]}"; do
      case "$w" in --from=*) from=1 ;; --*) ;; *) paths+=("$w") ;; esac
    done
    n=${#paths[@]}
    [ -z "$from" ] && [ "$n" -ge 2 ] || continue
    dest="${paths[n - 1]}"
    if [[ "$dest" == /* ]]; then  # absolute: inside the WORKDIR, or not for cmake -S .
      [[ "$dest/" == "$workdir/"* ]] || continue
      dest="${dest#"$workdir"}"; dest="./${dest#/}"
    fi
    for ((p = 0; p < n - 1; p++)); do
      src="${paths[p]}"
      [ -e "$source_dir/$src" ] && context_allowed "$src" || continue
      if [ -d "$source_dir/$src" ]; then
        mkdir -p "$ctx/$dest" && cp -a "$source_dir/$src/." "$ctx/$dest/"
      elif [[ "$dest" == */ ]] || [ "$dest" = "." ]; then
        mkdir -p "$ctx/$dest" && cp -a "$source_dir/$src" "$ctx/$dest/"
      else
        mkdir -p "$(dirname "$ctx/$dest")" && cp -a "$source_dir/$src" "$ctx/$dest"
      fi
    done
  done
  find "$ctx" -mindepth 1 -type d -name 'build*' -prune -exec rm -rf {} +
}
for ((s = 0; s < final; s++)); do
  runs=$(stage_runs "$s")
  grep -qE '(^|[[:space:]])cmake[[:space:]]+-S' <<< "$runs" || continue
  if [ "$configure" -eq 0 ]; then
    skip "stage $s: configure from the copied files (--skip-configure)"
    continue
  fi
  if ! command -v cmake > /dev/null; then
    skip "stage $s: no cmake here: configure from the copied files not tried"
    continue
  fi
  ctx=$(mktemp -d)
  stage_context "$s" "$ctx"
  mapfile -t options < <(words "$(resolve "$s" "$runs")" | grep -E '^-D' |
                         grep -v '^-DPACER_REQUIRE_CUDNN=')
  if cmake -S "$ctx" -B "$ctx/.configure" "${options[@]}" > "$ctx.log" 2>&1; then
    ok "stage $s: cmake configures from the files the stage copies"
  else
    fail "stage $s: cmake does not configure from the files the stage copies (a file CMake reads is not copied, or not allowed by .dockerignore?):"
    grep -A3 'CMake Error' "$ctx.log" | head -n 12 | sed 's/^/    /'
  fi
  rm -rf "$ctx" "$ctx.log"
done

# --- cmake targets and build-tree paths ----------------------------------------
for ((s = 0; s < final; s++)); do
  runs=$(stage_runs "$s")
  [ -n "$runs" ] || continue
  # The targets named after --target.
  targets=$(words "$runs" | awk '
    /^--target$/ { on = 1; next }
    on && (/^-/ || /^&&$/ || /^;$/ || /^\|/) { on = 0 }
    on { print }')
  for t in $targets; do
    if awk -v t="$t" '$2 == t { found = 1 } END { exit !found }' <<< "$target_table"; then
      ok "stage $s: cmake --target $t is a project target"
    else
      fail "stage $s: cmake --target $t is not declared by any CMakeLists.txt"
    fi
  done
  # Paths read from the build tree (-B DIR) must be a target's output.
  bdir=$(words "$runs" | awk '/^-B$/ { getline; print; exit } /^-B./ { print substr($0, 3); exit }')
  [ -n "$bdir" ] || continue
  bdir="${bdir%/}"
  for w in $(words "$runs" | grep -E "^$bdir/" | sort -u); do
    rel="${w#"$bdir"/}"
    [ "$rel" = "CMakeCache.txt" ] && continue
    d=$(dirname "$rel")
    f=$(basename "$rel")
    tgt=$(awk -v d="$d" -v f="$f" '$1 == d && $3 == f { print $2; exit }' <<< "$target_table")
    if [ -n "$tgt" ]; then
      ok "stage $s: $w is the output of target $tgt ($d/CMakeLists.txt)"
    else
      fail "stage $s: $w is no target's output (no target in $d/CMakeLists.txt makes $f)"
    fi
    # Compare with where this build really put the same file.
    for b in "${binaries[@]}"; do
      [ "$(basename "$b")" = "$f" ] || continue
      if [ -n "$build_dir" ] && [ -e "$b" ]; then
        real_rel="${b#"${build_dir%/}"/}"
        [ "$real_rel" = "$rel" ]
        check $? "stage $s: $rel matches the real build's $real_rel"
      fi
    done
  done
done

# --- final stage: user, packages, entrypoint ---------------------------------
user=""
for ((i = 0; i < ${#ins_kw[@]}; i++)); do
  [ "${ins_stage[i]}" = "$final" ] && [ "${ins_kw[i]}" = "USER" ] && user="${ins_args[i]}"
done
if [[ "$user" =~ ^([0-9]+)(:([0-9]+))?$ ]] && [ "${BASH_REMATCH[1]}" -ne 0 ] &&
   [ "${BASH_REMATCH[3]:-1}" -ne 0 ]; then
  ok "final stage runs as numeric non-root USER $user"
else
  fail "final stage USER '${user}' is not a numeric non-root uid[:gid]"
fi

final_runs=$(stage_runs "$final")
packages=$(words "$final_runs" | awk '
  /^(apt-get|apt)$/ { cmd = 1; next }
  cmd && /^install$/ { on = 1; cmd = 0; next }
  { cmd = 0 }
  on && (/^&&$/ || /^;$/ || /^\|/) { on = 0 }
  on && !/^-/ { print }')
bad=$(grep -E -- '(-dev|-devel)(=|$)|^(build-essential|gcc|g\+\+|cpp|clang|cmake|make|ninja-build|cuda-nvcc|cuda-toolkit)(-[0-9.-]+)?(=|$)' \
      <<< "$packages")
[ -z "$bad" ]
check $? "final stage installs no compiler or -dev package${bad:+ (found: $(tr '\n' ' ' <<< "$bad"))}"

entry=""
for ((i = 0; i < ${#ins_kw[@]}; i++)); do
  [ "${ins_stage[i]}" = "$final" ] && [ "${ins_kw[i]}" = "ENTRYPOINT" ] && entry="${ins_args[i]}"
done
if [[ "$entry" =~ ^\[[[:space:]]*\"(/[^\"]+)\" ]]; then
  ep="${BASH_REMATCH[1]}"
  [ -n "${final_copied[$ep]:-}" ]
  check $? "ENTRYPOINT $ep (exec form) is copied in by the final stage"
else
  fail "final stage ENTRYPOINT '$entry' is not in exec form with an absolute path"
fi

# --- labels ------------------------------------------------------------------------
declare -A labels=()
for ((i = 0; i < ${#ins_kw[@]}; i++)); do
  [ "${ins_stage[i]}" = "$final" ] && [ "${ins_kw[i]}" = "LABEL" ] || continue
  rest="${ins_args[i]}"
  while [[ "$rest" =~ ^[[:space:]]*([A-Za-z0-9._-]+)=(\"([^\"]*)\"|([^[:space:]]*))(.*)$ ]]; do
    labels[${BASH_REMATCH[1]}]="${BASH_REMATCH[3]}${BASH_REMATCH[4]}"
    rest="${BASH_REMATCH[5]}"
  done
done
for key in title source licenses; do
  [ -n "${labels[org.opencontainers.image.$key]:-}" ]
  check $? "label org.opencontainers.image.$key is set"
done
label_version=$(resolve "$final" "${labels[org.opencontainers.image.version]:-}")
[ -n "$project_version" ] && [ "$label_version" = "$project_version" ]
check $? "label org.opencontainers.image.version '$label_version' equals the CMake project version '$project_version'"

# --- image repository, and the chart's ----------------------------------------
grep -qF -- "$image" "$dockerfile"
check $? "$name names its image repository $image"
if [ -f "$values" ]; then
  repos=$(sed -nE 's/^[[:space:]]*repository:[[:space:]]*"?([^"#[:space:]]+)"?.*/\1/p' "$values")
  grep -qxF -- "$image" <<< "$repos"
  check $? "chart values ($values) use image repository $image"
  stray=$(grep -E 'pacer-(controller|worker)' <<< "$repos" |
          grep -vxE 'ghcr\.io/pacer-dev/pacer-(controller|worker)')
  [ -z "$stray" ]
  check $? "chart values name no other pacer image repository${stray:+ (found: $stray)}"
  chart="$(dirname "$values")/Chart.yaml"
  app_version=$([ -f "$chart" ] && sed -nE 's/^appVersion:[[:space:]]*"?([^"[:space:]]+)"?.*/\1/p' "$chart")
  if [ -n "$app_version" ]; then
    [ "$app_version" = "$project_version" ]
    check $? "Chart.yaml appVersion '$app_version' (the default image tag) equals the project version"
  fi
else
  skip "chart values $values not present: image repositories not compared"
fi

# --- shared libraries covered by the final stage's packages --------------------
# Runtime packages whose Ubuntu 24.04 name differs from Debian 12's, for the
# ubuntu-based images: the check maps them back to the Debian packages this
# machine has, and reads their dependencies there (the two distributions'
# dependencies for these libraries are the same libraries).
declare -A ubuntu_to_debian=(
  [libyaml-cpp0.8]=libyaml-cpp0.7 [libspdlog1.12]=libspdlog1.10
  [libhiredis1.1.0]=libhiredis0.14 [libssl3t64]=libssl3
)
if [ "${#binaries[@]}" -gt 0 ] && ! command -v dpkg-query > /dev/null; then
  skip "no dpkg on this machine: shared libraries not mapped to packages"
  binaries=()
fi
if [ "${#binaries[@]}" -gt 0 ]; then
  # One line per installed package: name, "Essential Priority", dependencies.
  dpkg_table=$(dpkg-query -W \
    -f='${Package}\t${Status}\t${Essential} ${Priority}\t${Pre-Depends}, ${Depends}\n' |
    awk -F'\t' '$2 ~ / installed$/ { print $1 "\t" $3 "\t" $4 }')
  # closure ROOT...: the packages and everything they depend on, taking the
  # first alternative of each dependency (what apt installs); a root "=base"
  # stands for every Essential or Priority-required package.
  closure() {
    awk -F'\t' -v roots="$*" '
      { deps[$1] = $3; if ($2 ~ /^yes/ || $2 ~ /required$/) base[$1] = 1 }
      END {
        n = split(roots, queue, " ")
        for (i = 1; i <= n; i++) if (queue[i] == "=base") {
          queue[i] = "apt"
          for (b in base) queue[++n] = b
        }
        for (i = 1; i <= n; i++) {
          p = queue[i]; sub(/:.*/, "", p)
          if (p == "" || (p in seen)) continue
          seen[p] = 1
          m = split(deps[p], alts, ",")
          for (j = 1; j <= m; j++) {
            d = alts[j]; sub(/\|.*/, "", d); sub(/\(.*/, "", d); gsub(/[ \t]/, "", d)
            if (d != "") queue[++n] = d
          }
        }
        for (p in seen) print p
      }' <<< "$dpkg_table"
  }
  # The base image's packages: what a minimal Debian has (Essential or
  # Priority required) and their dependencies — libc6, libgcc-s1,
  # libstdc++6, zlib1g. The CUDA and slim images contain at least these.
  base_set=$(closure "=base")
  listed=()
  for p in $packages; do
    p="${p%%=*}"
    [ "$distro" = "ubuntu" ] && [ -n "${ubuntu_to_debian[$p]:-}" ] && p="${ubuntu_to_debian[$p]}"
    listed+=("$p")
  done
  covered=$(closure "${listed[@]}")
  # candidates PATH: the paths dpkg may know a library by. ldd may name the
  # /lib path of a merged-/usr system, or a symbolic link (alternatives) that
  # no package owns: the path, its target, and each with and without /usr.
  candidates() {
    local c
    for c in "$1" "$(readlink -f "$1")"; do printf '%s\n' "$c" "${c#/usr}" "/usr${c#/usr}"; done
  }
  # owners PATH...: "path<TAB>package" for every path some package owns, from
  # one dpkg -S call (each call reads the whole package database).
  owners() {
    dpkg -S "$@" 2> /dev/null | grep -v '^diversion' |
      sed -nE 's/^([^:,]+).*: (\/.*)$/\2\t\1/p'
  }
  for b in "${binaries[@]}"; do
    if [ ! -e "$b" ]; then
      skip "$b not built: its shared libraries not compared with the runtime packages"
      continue
    fi
    uncovered=0
    libs=$(ldd "$b" 2>&1)
    mapfile -t all_candidates < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 }' <<< "$libs" |
                                  while IFS= read -r path; do candidates "$path"; done | sort -u)
    owned=$([ "${#all_candidates[@]}" -eq 0 ] || owners "${all_candidates[@]}")
    while read -r so arrow path _; do
      [ "$arrow" = "=>" ] || continue
      case "$so" in
        # Sanitizer runtimes of an ASan/UBSan build: images are never built so.
        libasan.so* | libubsan.so* | liblsan.so* | libtsan.so*) continue ;;
      esac
      if [ "$path" = "not" ]; then
        fail "$(basename "$b"): $so not found by the loader on this machine"
        uncovered=1
        continue
      fi
      pkg=""
      while IFS= read -r c; do
        pkg=$(awk -F'\t' -v p="$c" '$1 == p { print $2; exit }' <<< "$owned")
        [ -n "$pkg" ] && break
      done < <(candidates "$path")
      if [ -z "$pkg" ]; then
        # Not from a package (CUDA under /usr/local/cuda): the final stage
        # must name it, asserting the base image provides it.
        if grep -qF -- "$so" <<< "$final_runs"; then
          ok "$(basename "$b"): $so ($path, no package) is asserted present by the final stage"
        else
          fail "$(basename "$b"): $so ($path) is from no package and the final stage does not assert it"
          uncovered=1
        fi
      elif grep -qxF -- "$pkg" <<< "$base_set"; then
        continue
      elif grep -qxF -- "$pkg" <<< "$covered"; then
        ok "$(basename "$b"): $so from $pkg is installed by the final stage"
      else
        fail "$(basename "$b"): $so from $pkg is not installed by the final stage"
        uncovered=1
      fi
    done <<< "$libs"
    [ "$uncovered" -eq 0 ] && ok "$(basename "$b"): every shared library is covered"
  done
fi

echo "$name: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
