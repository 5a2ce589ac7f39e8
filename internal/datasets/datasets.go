// Package datasets says which datasets a pod reads and which nodes cache them, for TephraIO
// (plugins/ioaware) and kubectl tephra. A pod declares its datasets in one of two ways:
//
//   - by name, in its annotation data.tephra.dev/datasets ("imagenet,coco"): a node caches the
//     dataset named imagenet when it has the label data.tephra.dev/imagenet="true", which whatever
//     fills the cache sets (a node-local cache's agent, an admin, a DaemonSet);
//   - by mounting a Fluid dataset's PersistentVolumeClaim: Fluid names the claim after its Dataset
//     and labels it, and every node whose cache holds the Dataset, with one key,
//     fluid.io/s-<namespace>-<name> ("true"; fluid.io/s-<dataset UID> when that would be longer
//     than a label allows). The claim's label is read, not rebuilt, so the long form works too.
//
// Names, not only claims: caches other than Fluid's, and data a job fetches itself, have no
// claim to mount. Claims, not only names: a Fluid user mounts the claim already, and need declare
// nothing more. A Tephra Job task's pods carry the annotation from their template. A PodGroup (or
// a Tephra Job, which passes it to its group) may carry both annotations for its members: a member
// that declares neither reads its group's, so that a job whose pods all read the same data says so
// once, and TephraGang weighs it when it chooses the group's domain.
//
// data.tephra.dev/locality says what the datasets are to placement: Preferred (the default), the
// nodes that cache more of them score higher; Required, the pod runs only on a node that caches
// every one of them.
package datasets

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

const (
	// Annotation lists, comma-separated, the names of the datasets a pod reads.
	Annotation = v1alpha1.DatasetsAnnotation
	// LocalityAnnotation is Preferred (the default) or Required.
	LocalityAnnotation = v1alpha1.DataLocalityAnnotation
	// NodeLabelPrefix prefixes a dataset's name in the label of the nodes that cache it
	// (data.tephra.dev/<name>="true").
	NodeLabelPrefix = "data.tephra.dev/"
	// FluidLabelPrefix prefixes the label that Fluid sets, "true", on a Dataset's claim and on
	// the nodes that cache it.
	FluidLabelPrefix = "fluid.io/s-"
	// Cached is the value of a node label that says the node caches the dataset.
	Cached = "true"
)

// Locality is what a pod's datasets are to its placement.
type Locality string

const (
	// Preferred: nodes that cache more of the pod's datasets score higher.
	Preferred Locality = "Preferred"
	// Required: the pod runs only on a node that caches every one of its datasets.
	Required Locality = "Required"
)

// Dataset is one dataset a pod reads.
type Dataset struct {
	// Name is how users see it: its name, or for Fluid's, "fluid:<namespace>/<claim>".
	Name string
	// NodeLabel is the node label that says, "true", that a node caches it.
	NodeLabel string
}

// CachedOn says whether a node with these labels caches the dataset.
func (d Dataset) CachedOn(labels map[string]string) bool {
	return labels[d.NodeLabel] == Cached
}

// Demand is what a pod declares: its datasets, and whether it must run where they are.
type Demand struct {
	Datasets []Dataset
	Locality Locality
}

// None says whether the pod reads no dataset placement knows of.
func (d Demand) None() bool { return len(d.Datasets) == 0 }

// CachedOn counts the pod's datasets a node with these labels caches, and names those it does
// not.
func (d Demand) CachedOn(labels map[string]string) (cached int, missing []string) {
	for _, ds := range d.Datasets {
		if ds.CachedOn(labels) {
			cached++
		} else {
			missing = append(missing, ds.Name)
		}
	}
	return cached, missing
}

// ClaimLabels returns the labels of the pod's claim of a name in its namespace, nil when it does
// not exist (yet).
type ClaimLabels func(namespace, name string) map[string]string

// Declares says whether annotations (a pod's or a group's) declare datasets or a locality.
func Declares(annotations map[string]string) bool {
	_, data := annotations[Annotation]
	_, locality := annotations[LocalityAnnotation]
	return data || locality
}

// Of reads what the pod declares: its own annotations, or, when they declare neither, those of
// its group (group: the group's annotations, nil for none). claims reads the labels of the claims
// it mounts (nil: claims are not read). An error says which declaration is malformed; the pod is
// then not placed by it, and nothing else is read of it.
func Of(pod *corev1.Pod, group map[string]string, claims ClaimLabels) (Demand, error) {
	declaration, from := pod.Annotations, ""
	if !Declares(declaration) && Declares(group) {
		declaration, from = group, "its PodGroup's "
	}
	d, err := declared(declaration)
	if err != nil {
		return Demand{}, fmt.Errorf("%s%w", from, err)
	}
	if claims != nil {
		for _, v := range pod.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			if label := fluidLabel(claims(pod.Namespace, v.PersistentVolumeClaim.ClaimName)); label != "" {
				d.Datasets = append(d.Datasets, Dataset{Name: "fluid:" + pod.Namespace + "/" + v.PersistentVolumeClaim.ClaimName, NodeLabel: label})
			}
		}
	}
	if d.Locality == Required && d.None() {
		return Demand{}, fmt.Errorf("%s%s: %s, but the pod declares no dataset (%s, or a Fluid dataset's claim)", from, LocalityAnnotation, Required, Annotation)
	}
	return d, nil
}

// declared reads the locality and the named datasets of one declaration's annotations.
func declared(annotations map[string]string) (Demand, error) {
	d := Demand{Locality: Preferred}
	switch l := Locality(annotations[LocalityAnnotation]); l {
	case "", Preferred:
	case Required:
		d.Locality = Required
	default:
		return Demand{}, fmt.Errorf("%s: %q is neither %s nor %s", LocalityAnnotation, l, Preferred, Required)
	}
	if list, ok := annotations[Annotation]; ok {
		names, err := ParseNames(list)
		if err != nil {
			return Demand{}, err
		}
		for _, name := range names {
			d.Datasets = append(d.Datasets, Dataset{Name: name, NodeLabel: NodeLabelPrefix + name})
		}
	}
	return d, nil
}

// ParseNames reads a comma-separated list of dataset names: each must fit in a node label's
// name (data.tephra.dev/<name>), and none may come twice.
func ParseNames(list string) ([]string, error) {
	var names []string
	for part := range strings.SplitSeq(list, ",") {
		name := strings.TrimSpace(part)
		if name == "" {
			return nil, fmt.Errorf("%s: %q has an empty dataset name", Annotation, list)
		}
		if errs := validation.IsQualifiedName(NodeLabelPrefix + name); len(errs) > 0 {
			return nil, fmt.Errorf("%s: dataset name %q is not valid in a node label (%s%s): %s", Annotation, name, NodeLabelPrefix, name, strings.Join(errs, "; "))
		}
		if slices.Contains(names, name) {
			return nil, fmt.Errorf("%s: dataset %q is listed twice", Annotation, name)
		}
		names = append(names, name)
	}
	return names, nil
}

// fluidLabel is the label Fluid set on a Dataset's claim, which it sets on the nodes that cache
// the Dataset too; "" for a claim that is not a Fluid dataset's. Fluid sets one; were there
// several, the first in order is read, the same every time.
func fluidLabel(labels map[string]string) string {
	label := ""
	for key, value := range labels {
		if strings.HasPrefix(key, FluidLabelPrefix) && value == Cached && (label == "" || key < label) {
			label = key
		}
	}
	return label
}
