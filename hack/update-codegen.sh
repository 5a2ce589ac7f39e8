#!/usr/bin/env bash
# Regenerates everything derived from apis/: deepcopy functions, CRD manifests and the typed
# clientset, listers and informers that the scheduler plugins use. Called by `make generate`.
set -euo pipefail
cd "$(dirname "$0")/.."

: "${CONTROLLER_GEN:?set CONTROLLER_GEN to the controller-gen binary (make generate does)}"

"$CONTROLLER_GEN" object:headerFile=hack/boilerplate.go.txt paths=./apis/...
rm -f manifests/crds/*_*.yaml
"$CONTROLLER_GEN" crd:generateEmbeddedObjectMeta=true paths="./apis/batch/...;./apis/scheduling/...;./apis/topology/..." output:crd:artifacts:config=manifests/crds
# The foreign CRDs (scheduler-plugins' and Volcano's, apis/foreign) go to an optional kustomize
# component, not to the base install: clusters with those schedulers already have them.
rm -f manifests/components/foreign-crds/*_*.yaml
"$CONTROLLER_GEN" crd paths=./apis/foreign/... output:crd:artifacts:config=manifests/components/foreign-crds
for crd in manifests/components/foreign-crds/*_*.yaml; do go run ./hack/crdpatch "$crd"; done
# The Job (and JobTemplate, CronJob) embeds pod templates; their upstream descriptions make the CRD too large for
# client-side `kubectl apply`. Its plugins without arguments may be null (`svc: null`).
for crd in manifests/crds/*_*.yaml; do
  case "$crd" in
    *batch.tephra.dev_jobs.yaml|*batch.tephra.dev_jobtemplates.yaml) go run ./hack/crdpatch -nullable-values spec.plugins "$crd" spec.tasks.template ;;
    *batch.tephra.dev_cronjobs.yaml) go run ./hack/crdpatch -nullable-values spec.jobTemplate.spec.plugins "$crd" spec.jobTemplate.spec.tasks.template ;;
    *) go run ./hack/crdpatch "$crd" ;;
  esac
done
# The Helm chart installs the same CRDs from its crds/ (helm reads no files outside the chart).
rm -f charts/tephra/crds/*.yaml
cp manifests/crds/*_*.yaml charts/tephra/crds/
# and the foreign CRDs from its foreign-crds/, rendered by a template when foreignCRDs.install is set.
rm -f charts/tephra/foreign-crds/*.yaml
cp manifests/components/foreign-crds/*_*.yaml charts/tephra/foreign-crds/
# and the monitoring manifests, rendered by templates when prometheusRule / grafanaDashboard are
# enabled (as files: their {{ $labels }} are Prometheus', not Helm's).
mkdir -p charts/tephra/monitoring
cp manifests/monitoring/prometheusrule.yaml manifests/monitoring/dashboard.json charts/tephra/monitoring/

# The generators come from k8s.io/code-generator at the version this module pins.
# (go list -m prints no directory until the module is downloaded, as on a fresh machine.)
go mod download k8s.io/code-generator
CODEGEN_PKG=$(go list -m -f '{{.Dir}}' k8s.io/code-generator)
GOBIN="$PWD/bin/codegen-$(go list -m -f '{{.Version}}' k8s.io/code-generator)"
export GOBIN
mkdir -p "$GOBIN"
# shellcheck source=/dev/null
source "$CODEGEN_PKG/kube_codegen.sh"
kube::codegen::gen_client \
  --with-watch \
  --output-dir apis/client \
  --output-pkg github.com/tephra-dev/tephra/apis/client \
  --boilerplate hack/boilerplate.go.txt \
  apis
