package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
)

// WaitForMoves waits until pod group group's events hold consolidating (its Consolidating
// event) and at least n of the pods movable names have a MovedForGang event, and returns the
// group's events and those pods'. The recorder writes each event from a goroutine of its own
// after the eviction or status it goes with, so they are waited for, not read once.
func WaitForMoves(t testing.TB, env *Env, ns, group, consolidating string, movable func(types.UID) bool, n int) (events string, moves []corev1.Event) {
	t.Helper()
	Eventually(t, 30*time.Second, fmt.Sprintf("the Consolidating event and %d %s events", n, schedulingv1alpha1.ReasonMovedForGang), func() (bool, string) {
		events = env.Events(ns, group)
		list, err := env.Kube.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + schedulingv1alpha1.ReasonMovedForGang})
		if err != nil {
			return false, err.Error()
		}
		moves = nil
		for _, e := range list.Items {
			if e.InvolvedObject.Kind == "Pod" && movable(e.InvolvedObject.UID) {
				moves = append(moves, e)
			}
		}
		return strings.Contains(events, consolidating) && len(moves) >= n, fmt.Sprintf("%d moved pods' events; the group's: %s", len(moves), events)
	})
	return events, moves
}
