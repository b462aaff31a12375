#!/usr/bin/env bash
# The tools a make target needs from the machine, checked before it downloads or builds anything:
# `scripts/prereqs.sh go kubectl npm` names each one that is missing or too old, the version
# needed and where the README says how to get it, and exits 1. Prints nothing when all are there.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readme_section='README.md, "Prerequisites"'
# The Go the local control plane's module declares (test/controlplane/go.mod), e.g. 1.24.
go_needed="$(sed -n 's/^go \([0-9]*\.[0-9]*\).*/\1/p' "$here/../test/controlplane/go.mod" 2>/dev/null)"
go_needed="${go_needed:-1.24}"

# version_ge A B: true when version A >= version B (major.minor).
version_ge() {
  local a_major a_minor b_major b_minor
  IFS=. read -r a_major a_minor _ <<<"$1"
  IFS=. read -r b_major b_minor _ <<<"$2"
  ((10#${a_major:-0} > 10#${b_major:-0} || (10#${a_major:-0} == 10#${b_major:-0} && 10#${a_minor:-0} >= 10#${b_minor:-0})))
}

problems=()
for tool in "$@"; do
  case "$tool" in
    go)
      if ! command -v go >/dev/null 2>&1; then
        problems+=("go is not on PATH: Go >= $go_needed is needed (it builds the local kube-apiserver, etcd, helm and promtool from their Go modules)")
      else
        have="$(go env GOVERSION 2>/dev/null | sed 's/^go//')"
        version_ge "${have:-0}" "$go_needed" ||
          problems+=("go is $have: Go >= $go_needed is needed (test/controlplane/go.mod)")
      fi
      ;;
    kubectl)
      command -v kubectl >/dev/null 2>&1 ||
        problems+=("kubectl is not on PATH: a kubectl for Kubernetes v1.32 or newer is needed")
      ;;
    npm)
      command -v npm >/dev/null 2>&1 ||
        problems+=("npm is not on PATH: Node.js with npm (any version that runs npm) is needed to install the project's packages and its pinned Node")
      ;;
    python3)
      if ! command -v python3 >/dev/null 2>&1; then
        problems+=("python3 is not on PATH: Python 3 with its venv module is needed for the tests of RunPod's Python SDK")
      elif ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
        problems+=("python3 has no venv/ensurepip module: it is needed for the tests of RunPod's Python SDK (Debian: python3-venv)")
      fi
      ;;
    make)
      command -v make >/dev/null 2>&1 || problems+=("make is not on PATH: GNU make is needed")
      ;;
    *)
      echo "prereqs.sh: unknown tool $tool" >&2
      exit 2
      ;;
  esac
done

if ((${#problems[@]})); then
  for p in "${problems[@]}"; do echo "missing prerequisite: $p" >&2; done
  echo "how to get them: $readme_section" >&2
  exit 1
fi
