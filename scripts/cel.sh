#!/usr/bin/env bash
# Prints the directory of a pinned CEL evaluator for node, installing it on
# first use.
#
# The CRD (manifests/crd/pacer.dev_trainjobs.yaml) carries CEL rules
# (x-kubernetes-validations) that only a real kube-apiserver evaluates; the
# test API server does not. tests/deploy/cel evaluates them with
# @bufbuild/cel, a CEL implementation for ECMAScript, and reads the YAML with
# the `yaml` package (no YAML parser ships with node). Both come from the npm
# registry, the only package registry besides Debian's that this project's
# machines reach; npm checks each tarball's sha512 integrity against it.
#
# Usage:  cel_dir="$(scripts/cel.sh)" && node tests/deploy/cel/cel_rules_test.mjs ...
#         (the packages are under "$cel_dir/node_modules").
# Where:  $PACER_CEL_DIR, default ~/.cache/pacer/cel (the packages are in
#         $PACER_CEL_DIR/cel-0.6.1-yaml-2.9.1).
# Idempotent and quiet: a second run only checks the installed versions.
# Exit codes: 0 with the directory on stdout; 1 when it cannot be installed
# (the reason on stderr).
set -euo pipefail

readonly cel_version="0.6.1"
readonly yaml_version="2.9.1"

root="${PACER_CEL_DIR:-${HOME}/.cache/pacer/cel}"
dir="${root}/cel-${cel_version}-yaml-${yaml_version}"

fail() {
  echo "cel.sh: $*" >&2
  exit 1
}

# The installed packages must be the pinned ones and must load in this node.
installed() {
  [ -f "$1/node_modules/@bufbuild/cel/package.json" ] &&
    node - "$1" "$cel_version" "$yaml_version" >/dev/null 2>&1 <<'EOF_NODE'
const fs = require("fs"), { createRequire } = require("module");
const [dir, celVersion, yamlVersion] = process.argv.slice(2);
const req = createRequire(dir + "/package.json");
const version = (name) =>
  JSON.parse(fs.readFileSync(`${dir}/node_modules/${name}/package.json`, "utf8")).version;
if (version("@bufbuild/cel") !== celVersion || version("yaml") !== yamlVersion) process.exit(1);
const cel = req("@bufbuild/cel");
if (cel.run("1 + 1 == 2") !== true) process.exit(1);
req("yaml").parse("a: 1");
EOF_NODE
}

command -v node >/dev/null || fail "node is needed to run the CEL evaluator (apt-get install -y nodejs)"
if installed "$dir"; then
  echo "$dir"
  exit 0
fi

command -v npm >/dev/null || fail "npm is needed to fetch @bufbuild/cel (apt-get install -y npm)"
mkdir -p "$root" || fail "cannot create $root"
rm -rf "$dir"  # a broken or partial install from an older run
work="$(mktemp -d "${root}/.install-XXXXXX")"
trap 'rm -rf "$work"' EXIT

# Exact versions (no ^ ranges); npm installs @bufbuild/cel's peer dependency
# (@bufbuild/protobuf) as well.
(cd "$work" && npm install --prefix "$work" --save-exact --no-audit --no-fund --silent \
  "@bufbuild/cel@${cel_version}" "yaml@${yaml_version}" >"$work/npm.log" 2>&1) ||
  fail "npm install @bufbuild/cel@${cel_version} yaml@${yaml_version} failed: $(grep -v 'Unknown user config' "$work/npm.log" | tail -n 3)"
installed "$work" || fail "@bufbuild/cel@${cel_version} does not load in node $(node --version)"
rm -f "$work/npm.log"
# A rename within one file system: a concurrent caller sees no half-installed
# directory. If another caller finished first, theirs is kept.
mv -T "$work" "$dir" 2>/dev/null || installed "$dir" || fail "cannot move the packages to $dir"
trap - EXIT
rm -rf "$work"
echo "$dir"
