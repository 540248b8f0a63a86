#!/usr/bin/env bash
# Vendors a Go module's requirements from Debian's Go source packages (/usr/share/gocode/src,
# golang-google-grpc-dev and friends in debian-packages.txt), for building without the Go module
# proxy: vendor/ links each required module to its Debian source and vendor/modules.txt lists it,
# and `go build` (go 1.14 or later in go.mod: -mod=vendor by default) reads only vendor/.
#   vendor.sh MODULE_DIR [REPLACED_MODULE=PATH …]
# A REPLACED_MODULE (required in go.mod and replaced by a local path there) is linked to PATH.
set -euo pipefail
module_dir=$1
shift
cd "$module_dir"
rm -rf vendor && mkdir vendor
declare -A replaced=()
for replacement in "$@"; do replaced[${replacement%%=*}]=${replacement#*=}; done
sed -n 's/^\t\([^ ]*\) \(v[^ ]*\).*/\1 \2/p' go.mod | while read -r module version; do
  mkdir -p "vendor/${module%/*}"
  if [ -n "${replaced[$module]:-}" ]; then
    ln -s "$(cd "${replaced[$module]}" && pwd)" "vendor/$module"
    printf '# %s %s => %s\n## explicit\n' "$module" "$version" "${replaced[$module]}" >> vendor/modules.txt
  else
    ln -s "/usr/share/gocode/src/$module" "vendor/$module"
    printf '# %s %s\n## explicit\n' "$module" "$version" >> vendor/modules.txt
  fi
done
