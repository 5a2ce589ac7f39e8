// Package image checks Tephra's container images as they are installed: `make image` builds
// them, and Docker runs them against a local control plane: the scheduler image in place of
// kube-scheduler in the static pod that kubeadm writes (only `image:` changed and --config added),
// and both images as their Deployments in manifests/ run them (nonroot, read-only root filesystem,
// as their ServiceAccounts). Without Docker the tests skip, except in CI (CI=true), where they fail.
package image

import (
	"context"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	schedulingv1alpha1 "github.com/tephra-dev/tephra/apis/scheduling/v1alpha1"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// dockerProblem says why Docker cannot run the images on this machine; empty when it can.
var dockerProblem string

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		dockerProblem = dockerUnavailable()
	}
	if dockerProblem != "" {
		// No test here can run without Docker: the control plane is not worth starting.
		os.Exit(m.Run())
	}
	// Tephra's manifests are installed (CRDs, namespace, RBAC); its components run as containers.
	code := framework.Main(m, localcluster.Options{WithoutScheduler: true, WithoutControllers: true}, func(*framework.Env) error {
		return buildImages(context.Background())
	})
	removeImages()
	os.Exit(code)
}

// requireDocker skips the test when Docker cannot run here, and fails it instead in CI, which
// must run it.
func requireDocker(t *testing.T) {
	t.Helper()
	if dockerProblem == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; in CI this test must run: .ci/run sets Docker up with hack/docker-setup.sh", dockerProblem)
	}
	t.Skipf("%s; to run this test, install Docker (Debian: apt-get install docker.io) and start its daemon (dockerd), e.g. with hack/docker-setup.sh as root", dockerProblem)
}

// The controllers image as its Deployment, and the scheduler image first as kubeadm's scheduler,
// then as its Deployment, place gangs. One scheduler container runs at a time (each is removed
// when its subtest ends), so each gang is placed by the one under test: both serve
// tephra-scheduler.
func TestImages(t *testing.T) {
	requireDocker(t)
	env := framework.Shared(t)
	ctx := framework.Context(t, 5*time.Minute)

	// The controllers create the default queue, which the pods below go to.
	runControllers(t, env)
	require.NoError(t, localcluster.WaitDefaultQueues(ctx, env.Cluster.Config), "the controllers' container made no default queues")

	t.Run("KubeadmStaticPod", func(t *testing.T) {
		runKubeadmScheduler(t, env)

		t.Run("GangIsPlaced", func(t *testing.T) {
			ns := env.Namespace(t)
			selector := env.Pool(t, "image-fit", 2, 4)
			createGang(t, env, ns, "fits", 3, "1", "", selector)
			for i := range 3 {
				env.WaitPod(t, ns, fmt.Sprintf("fits-%d", i), 2*time.Minute, "bound by the container scheduler", func(pod *corev1.Pod) bool {
					return pod.Spec.NodeName != ""
				})
			}
			// The PodGroup's status is written by the controllers' container only.
			framework.Eventually(t, time.Minute, "PodGroup fits Running with 3 pods running", func() (bool, string) {
				pg, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Get(ctx, "fits", metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				return pg.Status.Phase == schedulingv1alpha1.PodGroupRunning && pg.Status.Running == 3, fmt.Sprintf("status %+v", pg.Status)
			})
		})

		t.Run("GangThatCannotFitPlacesNone", func(t *testing.T) {
			ns := env.Namespace(t)
			// Two nodes of 4 CPUs hold two members of 3 CPUs, not the three of the minimum.
			selector := env.Pool(t, "image-unfit", 2, 4)
			createGang(t, env, ns, "unfit", 3, "3", "", selector)
			// Its first member finds the group unfit, and the others are refused with that verdict.
			var pods *corev1.PodList
			framework.Eventually(t, 2*time.Minute, "a member found unschedulable by the container scheduler", func() (bool, string) {
				var err error
				if pods, err = env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err != nil {
					return false, err.Error()
				}
				for _, pod := range pods.Items {
					for _, c := range pod.Status.Conditions {
						if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
							return true, ""
						}
					}
				}
				return false, "no member has a PodScheduled condition"
			})
			for _, pod := range pods.Items {
				require.Empty(t, pod.Spec.NodeName, "pod %s of a gang that cannot fit was bound", pod.Name)
			}
		})
	})

	t.Run("Deployment", func(t *testing.T) {
		runDeploymentScheduler(t, env)

		t.Run("GangIsPlaced", func(t *testing.T) {
			ns := env.Namespace(t)
			selector := env.Pool(t, "image-deployment", 2, 4)
			createGang(t, env, ns, "second", 2, "1", schedulingv1alpha1.SchedulerName, selector)
			for i := range 2 {
				env.WaitPod(t, ns, fmt.Sprintf("second-%d", i), 2*time.Minute, "bound by the Deployment's scheduler container", func(pod *corev1.Pod) bool {
					return pod.Spec.NodeName != ""
				})
			}
		})
	})
}

// createGang creates a PodGroup of minMember and as many pods in it for the named scheduler; with
// none, the default scheduler, which Tephra's image replaces in kubeadm's static pod, places them.
func createGang(t *testing.T, env *framework.Env, ns, name string, minMember int32, cpu, scheduler string, selector map[string]string) {
	t.Helper()
	_, err := env.Tephra.SchedulingV1alpha1().PodGroups(ns).Create(context.Background(), &schedulingv1alpha1.PodGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       schedulingv1alpha1.PodGroupSpec{MinMember: minMember, ScheduleTimeoutSeconds: ptr.To[int32](15)},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	for i := range minMember {
		_, err := env.Kube.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("%s-%d", name, i), Namespace: ns,
				Labels: map[string]string{schedulingv1alpha1.PodGroupLabel: name},
			},
			Spec: corev1.PodSpec{
				SchedulerName: scheduler,
				RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector:  selector,
				Containers: []corev1.Container{{
					Name: "work", Image: "busybox",
					Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
				}},
			},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}
