// Package ledgertest builds the pods that the ledger's tests and the queue plugin's tests count.
package ledgertest

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// GPU is the resource the test pods ask for.
const GPU corev1.ResourceName = "nvidia.com/gpu"

// Pod is a pod of Tephra's scheduler in namespace ns, named and identified by uid, bound to node
// ("" for pending), asking for gpus.
func Pod(uid string, labels map[string]string, node string, gpus int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid), Labels: labels},
		Spec: corev1.PodSpec{
			SchedulerName: v1alpha1.SchedulerName,
			NodeName:      node,
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{GPU: *resource.NewQuantity(gpus, resource.DecimalSI)},
			}}},
		},
	}
}
