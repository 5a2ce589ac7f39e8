package whenserved

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// fakeManager records the runnables added to it; its RESTMapper knows the kinds of mapper, which
// a test may replace while the recheck runs.
type fakeManager struct {
	mu        sync.Mutex
	mapper    *meta.DefaultRESTMapper
	runnables []manager.Runnable
}

func (m *fakeManager) serve(gvks ...schema.GroupVersionKind) {
	mapper := meta.NewDefaultRESTMapper(nil)
	for _, gvk := range gvks {
		mapper.Add(gvk, meta.RESTScopeNamespace)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mapper = mapper
}

func (m *fakeManager) Add(r manager.Runnable) error {
	m.runnables = append(m.runnables, r)
	return nil
}

func (m *fakeManager) GetRESTMapper() meta.RESTMapper {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mapper
}

var (
	servedGVK  = schema.GroupVersionKind{Group: "served.example", Version: "v1", Kind: "Thing"}
	missingGVK = schema.GroupVersionKind{Group: "missing.example", Version: "v1", Kind: "Thing"}
	laterGVK   = schema.GroupVersionKind{Group: "later.example", Version: "v1", Kind: "Thing"}
)

func newManager() *fakeManager {
	m := &fakeManager{}
	m.serve(servedGVK)
	return m
}

// An adapter whose kind is served starts at once; one whose kind is not served does not, and no
// runnable waits when all are started.
func TestStartsOnlyServedAdapters(t *testing.T) {
	mgr := newManager()
	var served, missing atomic.Int32
	require.NoError(t, Start(mgr, logr.Discard(),
		Adapter{Name: "served", GVK: servedGVK, Setup: func() error { served.Add(1); return nil }},
	))
	assert.Equal(t, int32(1), served.Load())
	assert.Empty(t, mgr.runnables, "nothing waits")

	require.NoError(t, Start(mgr, logr.Discard(),
		Adapter{Name: "missing", GVK: missingGVK, Setup: func() error { missing.Add(1); return nil }},
	))
	assert.Equal(t, int32(0), missing.Load())
	assert.Len(t, mgr.runnables, 1, "the recheck runnable")
}

// An error of Setup at start is returned.
func TestSetupErrorAtStart(t *testing.T) {
	err := Start(newManager(), logr.Discard(), Adapter{Name: "served", GVK: servedGVK, Setup: func() error { return errors.New("boom") }})
	require.ErrorContains(t, err, "served: boom")
}

// An adapter whose API becomes served later (as the upstream PodGroup adapter's, told by its own
// Served func, or a CRD installed later, told by the RESTMapper) is started once by the recheck.
func TestStartsWhenServedLater(t *testing.T) {
	defer func(old time.Duration) { RecheckInterval = old }(RecheckInterval)
	RecheckInterval = 10 * time.Millisecond
	mgr := newManager()
	var apiOn atomic.Bool
	var byFunc, byMapper, checks atomic.Int32
	require.NoError(t, Start(mgr, logr.Discard(),
		Adapter{Name: "by-func", GVK: missingGVK,
			Served: func() (bool, error) { checks.Add(1); return apiOn.Load(), nil },
			Setup:  func() error { byFunc.Add(1); return nil }},
		Adapter{Name: "by-mapper", GVK: laterGVK,
			Setup: func() error { byMapper.Add(1); return nil }},
	))
	require.Len(t, mgr.runnables, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- mgr.runnables[0].Start(ctx) }()

	require.Eventually(t, func() bool { return checks.Load() >= 3 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, int32(0), byFunc.Load(), "not served yet")
	apiOn.Store(true)
	require.Eventually(t, func() bool { return byFunc.Load() == 1 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, int32(0), byMapper.Load())

	// A CRD installed: the RESTMapper knows its kind now.
	mgr.serve(servedGVK, laterGVK)
	require.Eventually(t, func() bool { return byMapper.Load() == 1 }, 5*time.Second, 5*time.Millisecond)

	// Both started: the recheck ends by itself.
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the recheck runnable did not end once every adapter started")
	}
	assert.Equal(t, int32(1), byFunc.Load(), "started once")
	assert.Equal(t, int32(1), byMapper.Load(), "started once")
}

// The recheck stops with its context while an adapter still waits.
func TestRecheckStopsWithContext(t *testing.T) {
	defer func(old time.Duration) { RecheckInterval = old }(RecheckInterval)
	RecheckInterval = 10 * time.Millisecond
	mgr := newManager()
	require.NoError(t, Start(mgr, logr.Discard(), Adapter{Name: "missing", GVK: missingGVK, Setup: func() error { return nil }}))
	require.Len(t, mgr.runnables, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.runnables[0].Start(ctx) }()
	time.Sleep(30 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the recheck runnable did not stop with its context")
	}
}
