package localcluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// In a cluster, Tephra's components are Deployments: when a container exits, the kubelet starts
// it again (restartPolicy Always), waiting longer after each exit in a row (CrashLoopBackOff).
// Here they are plain processes, so Options.RestartTephraOnExit has the cluster do the kubelet's
// part. It matters where the apiserver goes away: a component that holds a leader-election lease
// and cannot renew it in time must stop acting, since a standby may already lead, and both
// kube-scheduler and controller-runtime stop it by exiting. Without someone to start it again,
// a local cluster would then stay without a scheduler, which no real cluster does.

// Exit is one exit of a supervised component's process.
type Exit struct {
	// Component is the replica's process name, e.g. "tephra-scheduler".
	Component string
	At        time.Time
	// Status is how the process ended, e.g. "exit status 1".
	Status string
	// LastLines are the last lines its run logged, which say why it exited.
	LastLines string
}

// supervisor restarts Tephra's processes when they exit.
type supervisor struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	exits []Exit
}

// Backoff of restarts in a row: the kubelet's starts at 10 s and doubles up to 5 minutes; a test
// cannot wait that long, and a component that exits at once keeps exiting either way.
const (
	firstRestartDelay = time.Second
	maxRestartDelay   = 8 * time.Second
)

// superviseTephra starts watching every replica of Tephra's components that the cluster runs.
func (c *Cluster) superviseTephra() {
	ctx, cancel := context.WithCancel(context.Background())
	s := &supervisor{cancel: cancel}
	c.mu.Lock()
	c.supervisor = s
	var names []string
	for name := range c.procs {
		if _, ok := componentOf(name); ok {
			names = append(names, name)
		}
	}
	c.mu.Unlock()
	for _, name := range names {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.supervise(ctx, s, name)
		}()
	}
}

// supervise waits for one replica's process to exit and starts it again, until ctx ends.
func (c *Cluster) supervise(ctx context.Context, s *supervisor, name string) {
	delay := firstRestartDelay
	for {
		p := c.process(name)
		select {
		case <-ctx.Done():
			return
		case <-p.done:
		}
		status := "exited"
		if _, err := p.exited(); err != nil {
			status = err.Error()
		}
		s.mu.Lock()
		s.exits = append(s.exits, Exit{Component: name, At: time.Now(), Status: status, LastLines: lastRun(p.logPath, 8)})
		s.mu.Unlock()
		fmt.Fprintf(c.log, "%s exited (%s); starting it again in %v, as its Deployment's kubelet would\n", name, status, delay)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, maxRestartDelay)
			err := c.StartComponent(ctx, name)
			if err == nil {
				delay = firstRestartDelay
				break
			}
			if ctx.Err() != nil {
				return
			}
			fmt.Fprintf(c.log, "starting %s again: %v\n", name, err)
			// A process that started but was not healthy in time keeps running, as a pod does
			// until a liveness probe fails (Tephra's probe /healthz, which a component waiting
			// for the apiserver passes): watch it. One that could not start at all (its token
			// cannot be requested while the apiserver is away) is tried again.
			if c.Running(name) {
				break
			}
		}
	}
}

// stopSupervisor stops restarting components, before the cluster stops them.
func (c *Cluster) stopSupervisor() {
	c.mu.Lock()
	s := c.supervisor
	c.mu.Unlock()
	if s == nil {
		return
	}
	s.cancel()
	s.wg.Wait()
}

// Exits lists the exits of Tephra's processes that the cluster started again
// (Options.RestartTephraOnExit), oldest first.
func (c *Cluster) Exits() []Exit {
	c.mu.Lock()
	s := c.supervisor
	c.mu.Unlock()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Exit(nil), s.exits...)
}

// WaitHealthy waits until a component runs and answers its health check, whichever process of
// it that is: a supervised component may be started again meanwhile.
func (c *Cluster) WaitHealthy(ctx context.Context, name string) error {
	var last error
	for {
		if p := c.process(name); p != nil {
			if exited, _ := p.exited(); !exited {
				attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
				last = c.waitHealthy(attempt, name, p)
				cancel()
				if last == nil {
					return nil
				}
			} else {
				last = fmt.Errorf("%s is not running", name)
			}
		} else {
			last = fmt.Errorf("%s was never started", name)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// lastRun returns the last n lines of a process's log, from its latest run only.
func lastRun(path string, n int) string {
	lines := strings.Split(tail(path, 200), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], "==== ") {
			lines = lines[i+1:]
			break
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
