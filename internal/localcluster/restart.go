package localcluster

import (
	"context"
	"fmt"
	"time"
)

// RestartOptions say how RestartComponent takes a component down.
type RestartOptions struct {
	// Kill ends the process at once (SIGKILL), as a crash or a lost machine would; otherwise it
	// is stopped gracefully (SIGTERM, as for a rolling upgrade), and killed after 20 s.
	Kill bool
	// Down is how long it stays down before it is started again.
	Down time.Duration
}

// RestartComponent stops a component (etcd, kube-apiserver, kube-controller-manager, kwok, or a
// Tephra process the cluster does not supervise), starts it again and waits until it is healthy.
// It keeps everything that identifies it: the same flags, the same ports (so the apiserver's
// address and every kubeconfig stay valid, and the clients handed out reconnect by themselves),
// the same certificates, and etcd's data folder, so that every object survives.
//
// After etcd, it also waits until the apiserver is ready again (its readiness covers etcd), since
// that is when the cluster works again.
func (c *Cluster) RestartComponent(ctx context.Context, name string, opts RestartOptions) error {
	if _, tephra := componentOf(name); tephra && c.opts.RestartTephraOnExit {
		return fmt.Errorf("%s is supervised (Options.RestartTephraOnExit): kill it (KillComponent) and the cluster starts it again", name)
	}
	if c.process(name) == nil {
		return fmt.Errorf("%s was never started", name)
	}
	if opts.Kill {
		c.KillComponent(name)
	} else {
		c.StopComponent(name)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(opts.Down):
	}
	if err := c.StartComponent(ctx, name); err != nil {
		return err
	}
	if name == Etcd && c.Running(APIServer) {
		if err := c.waitHealthy(ctx, APIServer, c.process(APIServer)); err != nil {
			return fmt.Errorf("after restarting etcd: %w", err)
		}
	}
	return nil
}
