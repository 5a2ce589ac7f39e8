package foreign

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	volcanov1beta1 "github.com/tephra-dev/tephra/apis/foreign/volcano/v1beta1"
)

// The exclusive topology of an LWS group is read from the leader pod that controls its Volcano
// PodGroup; other groups, and LWS groups without it, have none.
func TestLWSExclusiveTopologyIsTheLeaders(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, volcanov1beta1.AddToScheme(scheme))
	leader := func(name string, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Annotations: annotations}}
	}
	exclusive := leader("serve-0", map[string]string{lwsExclusiveTopologyAnnotation: "example.com/rack"})
	plain := leader("plain-0", nil)
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(exclusive, plain).Build()
	group := func(lws string, owner *corev1.Pod) *volcanov1beta1.PodGroup {
		pg := &volcanov1beta1.PodGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: owner.Name + "-rev", Labels: map[string]string{}}}
		if lws != "" {
			pg.Labels[lwsNameLabel] = lws
		}
		pg.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)}}
		return pg
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		pg   *volcanov1beta1.PodGroup
		want string
	}{
		{"an LWS group with exclusive-topology", group("serve", exclusive), "example.com/rack"},
		{"an LWS group without it", group("plain", plain), ""},
		{"not an LWS group", group("", exclusive), ""},
		{"its leader gone", group("serve", leader("gone-0", nil)), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := lwsExclusiveTopology(ctx, c, tc.pg)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}
