// Package foreign holds the API types of other batch schedulers that Tephra reads: the
// scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1) and the Volcano PodGroup and Queue
// (scheduling.volcano.sh/v1beta1). They are written here from the fields those projects
// document (no upstream modules), only for the controller-runtime client of tephra-controllers'
// adapters (controllers/foreign): there is no generated clientset for them. Their CRDs are the
// optional kustomize component manifests/components/foreign-crds, for clusters that have
// neither scheduler installed.
package foreign
