package setup

import (
	"sync"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/tephra-dev/tephra/internal/groups"
)

// UpstreamGroups is upstream Kubernetes' gang API (scheduling.k8s.io/v1beta1 PodGroups, and the
// Workloads their queue label may come from) as the scheduler reads it: translated in memory
// (groups.Upstream), from informers of the scheduler's own factory, which kube-scheduler starts
// and waits for with its others. With its GenericWorkload gate on, kube-scheduler watches
// PodGroups itself, through the same informer.
type UpstreamGroups struct {
	*groups.Upstream
	PodGroups cache.SharedIndexInformer
	// Workloads is nil when the apiserver does not serve them.
	Workloads cache.SharedIndexInformer
}

var (
	upstreamMu sync.Mutex
	upstream   = map[*rest.Config]*UpstreamGroups{}
	// served are answers to whether upstream PodGroups and Workloads are served, given rather
	// than asked of the apiserver (ServeUpstream).
	served = map[*rest.Config][2]bool{}
)

// ServeUpstream tells Upstream, for the scheduler of config, whether the apiserver serves
// upstream PodGroups and Workloads, rather than have it ask (for tests without an apiserver).
func ServeUpstream(config *rest.Config, podGroups, workloads bool) {
	upstreamMu.Lock()
	defer upstreamMu.Unlock()
	served[config] = [2]bool{podGroups, workloads}
	delete(upstream, config)
}

// Upstream returns the scheduler's upstream groups, nil when the apiserver does not serve
// upstream PodGroups (without the GenericWorkload gate and --runtime-config): an informer of a
// resource that is not served would never sync, and kube-scheduler would never start. Whether
// they are served is asked once, when the first plugin is built: an apiserver that serves them
// later is read after the scheduler restarts.
func Upstream(handle fwk.Handle) (*UpstreamGroups, error) {
	upstreamMu.Lock()
	defer upstreamMu.Unlock()
	config := handle.KubeConfig()
	if u, asked := upstream[config]; asked {
		return u, nil
	}
	answer, given := served[config]
	podGroups, workloads := answer[0], answer[1]
	if !given {
		var err error
		if podGroups, workloads, err = groups.UpstreamServed(config); err != nil {
			return nil, err
		}
	}
	var u *UpstreamGroups
	if podGroups {
		factory := handle.SharedInformerFactory().Scheduling().V1beta1()
		u = &UpstreamGroups{PodGroups: factory.PodGroups().Informer()}
		if workloads {
			u.Workloads = factory.Workloads().Informer()
			u.Upstream = groups.NewUpstream(factory.PodGroups().Lister(), factory.Workloads().Lister())
		} else {
			u.Upstream = groups.NewUpstream(factory.PodGroups().Lister(), nil)
		}
	}
	upstream[config] = u
	return u, nil
}

// Watch registers h, a handler of Tephra's PodGroups, for the groups of upstream PodGroups
// (groups.Upstream.Handler) and their Workloads' queue labels. objects are the Tephra PodGroup
// objects, which win over upstream PodGroups of their name.
func (u *UpstreamGroups) Watch(h cache.ResourceEventHandler, objects groups.ObjectLister) error {
	if _, err := u.PodGroups.AddEventHandler(u.Handler(h, objects)); err != nil {
		return err
	}
	if u.Workloads != nil {
		if _, err := u.Workloads.AddEventHandler(u.WorkloadHandler(h, objects)); err != nil {
			return err
		}
	}
	return nil
}

// Lister is the upstream groups' reader, nil when there are none (for groups.NewLister).
func (u *UpstreamGroups) Lister() *groups.Upstream {
	if u == nil {
		return nil
	}
	return u.Upstream
}
