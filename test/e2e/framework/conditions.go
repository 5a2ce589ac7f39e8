package framework

import "k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

// Condition reads a condition of an object read as unstructured (a Kueue Workload, say): its
// status, reason and message, all "" when it has none of that type.
func Condition(u *unstructured.Unstructured, kind string) (status, reason, message string) {
	conditions, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conditions {
		m, _ := c.(map[string]any)
		if m["type"] == kind {
			status, _ = m["status"].(string)
			reason, _ = m["reason"].(string)
			message, _ = m["message"].(string)
		}
	}
	return status, reason, message
}
