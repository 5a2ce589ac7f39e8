package datasets

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func podWith(annotations map[string]string, claims ...string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "team-a", Annotations: annotations}}
	for _, c := range claims {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: c, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c}}})
	}
	return pod
}

// A pod's datasets are the names it lists and the Fluid datasets' claims it mounts; a node caches
// one when it has the dataset's label, as Tephra's convention or Fluid names it.
func TestADemandIsTheNamesAndTheFluidClaims(t *testing.T) {
	claims := func(namespace, name string) map[string]string {
		switch namespace + "/" + name {
		case "team-a/imagenet":
			return map[string]string{"fluid.io/s-team-a-imagenet": "true", "app": "x"}
		case "team-a/scratch":
			return map[string]string{"app": "x"}
		}
		return nil
	}
	d, err := Of(podWith(map[string]string{Annotation: "coco, wiki"}, "imagenet", "scratch", "missing"), nil, claims)
	require.NoError(t, err)
	assert.Equal(t, Preferred, d.Locality, "the default")
	assert.Equal(t, []Dataset{
		{Name: "coco", NodeLabel: "data.tephra.dev/coco"},
		{Name: "wiki", NodeLabel: "data.tephra.dev/wiki"},
		{Name: "fluid:team-a/imagenet", NodeLabel: "fluid.io/s-team-a-imagenet"},
	}, d.Datasets, "a claim that is not Fluid's, or not there yet, is no dataset")

	cached, missing := d.CachedOn(map[string]string{"data.tephra.dev/coco": "true", "fluid.io/s-team-a-imagenet": "true", "data.tephra.dev/wiki": "false"})
	assert.Equal(t, 2, cached)
	assert.Equal(t, []string{"wiki"}, missing)

	none, err := Of(podWith(nil, "imagenet"), nil, nil)
	require.NoError(t, err)
	assert.True(t, none.None(), "claims are not read without a reader")
}

// Bad declarations are refused with what is wrong, and nothing of them is read.
func TestBadDeclarationsAreRefused(t *testing.T) {
	for annotations, want := range map[[2]string]string{
		{"Not_Valid!", ""}: `dataset name "Not_Valid!" is not valid in a node label`,
		{"a,,b", ""}:       `has an empty dataset name`,
		{"a,a", ""}:        `dataset "a" is listed twice`,
		{"a", "Always"}:    `data.tephra.dev/locality: "Always" is neither Preferred nor Required`,
		{"", "Required"}:   `the pod declares no dataset`,
		{"a-very-long-dataset-name-that-does-not-fit-in-the-sixty-three-characters-of-a-label", ""}: `name part must be no more than 63 bytes`,
	} {
		a := map[string]string{}
		if annotations[0] != "" {
			a[Annotation] = annotations[0]
		}
		if annotations[1] != "" {
			a[LocalityAnnotation] = annotations[1]
		}
		d, err := Of(podWith(a), nil, nil)
		if assert.Error(t, err, annotations) {
			assert.Contains(t, err.Error(), want)
		}
		assert.True(t, d.None())
	}
	d, err := Of(podWith(map[string]string{Annotation: "imagenet", LocalityAnnotation: "Required"}), nil, nil)
	require.NoError(t, err)
	assert.Equal(t, Required, d.Locality)
}

// Fluid's long form, fluid.io/s-<dataset UID>, is read from the claim as it is.
func TestFluidsLongLabelIsReadFromTheClaim(t *testing.T) {
	claims := func(string, string) map[string]string {
		return map[string]string{"fluid.io/s-5c4e1a2b-uid": "true"}
	}
	d, err := Of(podWith(nil, "a-dataset-whose-namespaced-name-is-too-long-for-a-label"), nil, claims)
	require.NoError(t, err)
	require.Len(t, d.Datasets, 1)
	assert.Equal(t, "fluid.io/s-5c4e1a2b-uid", d.Datasets[0].NodeLabel)
	assert.True(t, d.Datasets[0].CachedOn(map[string]string{"fluid.io/s-5c4e1a2b-uid": "true"}))
}

// A member that declares nothing reads its group's declaration; one that declares anything keeps
// its own, whole; a malformed group declaration says it is the group's.
func TestAMemberReadsItsGroupsDeclarationUnlessItHasItsOwn(t *testing.T) {
	group := map[string]string{Annotation: "imagenet", LocalityAnnotation: "Required"}
	d, err := Of(podWith(nil), group, nil)
	require.NoError(t, err)
	assert.Equal(t, Required, d.Locality)
	if assert.Len(t, d.Datasets, 1) {
		assert.Equal(t, "data.tephra.dev/imagenet", d.Datasets[0].NodeLabel)
	}

	d, err = Of(podWith(map[string]string{Annotation: "coco"}), group, nil)
	require.NoError(t, err)
	assert.Equal(t, Preferred, d.Locality, "the member's own declaration is read whole")
	if assert.Len(t, d.Datasets, 1) {
		assert.Equal(t, "coco", d.Datasets[0].Name)
	}

	_, err = Of(podWith(nil), map[string]string{Annotation: "Bad_Name!"}, nil)
	if assert.Error(t, err) {
		assert.Contains(t, err.Error(), "its PodGroup's data.tephra.dev/datasets")
	}
	d, err = Of(podWith(nil), map[string]string{"other": "x"}, nil)
	require.NoError(t, err)
	assert.True(t, d.None())
}
