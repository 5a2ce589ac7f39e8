package localcluster

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// With Options.SchedulerThroughProxy, tephra-scheduler reaches the apiserver only through a TCP
// proxy of the test process, which PartitionScheduler cuts: a network partition between the
// scheduler and the control plane, while everything else (the controllers, kwok, the tests'
// clients) still reaches the apiserver. The proxy forwards bytes, not requests, so TLS and
// authentication are the scheduler's own, end to end.

// PartitionMode is what the cut proxy does with the connections the scheduler opens.
type PartitionMode int

const (
	// Blackhole accepts connections and forwards nothing, as when packets are dropped: the
	// scheduler's requests wait for their timeouts (the TLS handshake's 10 s, the lease
	// renewal's deadline).
	Blackhole PartitionMode = iota + 1
	// Refuse resets connections at once, as when the route is gone: requests fail fast and the
	// scheduler retries.
	Refuse
)

func (m PartitionMode) String() string {
	switch m {
	case Blackhole:
		return "blackhole"
	case Refuse:
		return "refuse"
	}
	return "forwarding"
}

// PartitionScheduler cuts tephra-scheduler off the apiserver: its open connections are reset and
// new ones are blackholed or refused until HealScheduler (Options.SchedulerThroughProxy).
func (c *Cluster) PartitionScheduler(mode PartitionMode) error {
	p, err := c.schedulerProxy()
	if err != nil {
		return err
	}
	p.partition(mode)
	return nil
}

// HealScheduler ends a partition: connections held by a blackhole are reset, so that the
// scheduler opens new ones, and new connections are forwarded again.
func (c *Cluster) HealScheduler() error {
	p, err := c.schedulerProxy()
	if err != nil {
		return err
	}
	p.heal()
	return nil
}

// SchedulerProxyConnections counts the connections the proxy forwards now, e.g. to see that the
// scheduler reconnected after a partition.
func (c *Cluster) SchedulerProxyConnections() (int, error) {
	p, err := c.schedulerProxy()
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.forwarding), nil
}

// schedulerProxy returns the scheduler's proxy, starting it the first time. Its port is kept, so
// that a restarted scheduler finds it where its kubeconfig says.
func (c *Cluster) schedulerProxy() (*tcpProxy, error) {
	if !c.opts.SchedulerThroughProxy {
		return nil, errors.New("localcluster: the cluster was started without Options.SchedulerThroughProxy")
	}
	c.proxyMu.Lock()
	defer c.proxyMu.Unlock()
	if c.proxy != nil {
		return c.proxy, nil
	}
	port, err := c.port(Scheduler + "/apiserver-proxy")
	if err != nil {
		return nil, err
	}
	p, err := newTCPProxy(fmt.Sprintf("127.0.0.1:%d", port), fmt.Sprintf("127.0.0.1:%d", c.Port(APIServer)))
	if err != nil {
		return nil, fmt.Errorf("the scheduler's proxy to the apiserver: %w", err)
	}
	c.proxy = p
	return p, nil
}

// throughSchedulerProxy writes a copy of a kubeconfig whose server is the scheduler's proxy, and
// returns its path. The apiserver's certificate is for 127.0.0.1, as the proxy's address is.
func (c *Cluster) throughSchedulerProxy(kubeconfig string) (string, error) {
	p, err := c.schedulerProxy()
	if err != nil {
		return "", err
	}
	config, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return "", err
	}
	for _, cluster := range config.Clusters {
		cluster.Server = "https://" + p.listener.Addr().String()
	}
	path := strings.TrimSuffix(kubeconfig, ".kubeconfig") + "-through-proxy.kubeconfig"
	if err := clientcmd.WriteToFile(*config, path); err != nil {
		return "", err
	}
	return path, nil
}

func (c *Cluster) closeSchedulerProxy() {
	c.proxyMu.Lock()
	defer c.proxyMu.Unlock()
	if c.proxy != nil {
		c.proxy.close()
		c.proxy = nil
	}
}

// tcpProxy forwards TCP connections to a target, and can stop doing so.
type tcpProxy struct {
	listener net.Listener
	target   string

	mu         sync.Mutex
	mode       PartitionMode // 0 while forwarding
	closed     bool
	forwarding map[net.Conn]net.Conn // client side to apiserver side
	held       map[net.Conn]struct{} // accepted during a blackhole
}

func newTCPProxy(address, target string) (*tcpProxy, error) {
	l, err := net.Listen("tcp", address)
	if err != nil {
		return nil, err
	}
	p := &tcpProxy{listener: l, target: target, forwarding: map[net.Conn]net.Conn{}, held: map[net.Conn]struct{}{}}
	go p.serve()
	return p, nil
}

func (p *tcpProxy) serve() {
	for {
		conn, err := p.listener.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		switch {
		case p.closed || p.mode == Refuse:
			reset(conn)
		case p.mode == Blackhole:
			// Nothing is read: what the scheduler sends stays in the socket's buffers, as
			// packets lost on the way would.
			p.held[conn] = struct{}{}
		default:
			go p.forward(conn)
		}
		p.mu.Unlock()
	}
}

// forward copies bytes both ways between a client and a new connection to the target until either
// side closes or the proxy cuts them.
func (p *tcpProxy) forward(client net.Conn) {
	upstream, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		// The apiserver is down: the scheduler sees what it would see dialing it directly.
		reset(client)
		return
	}
	p.mu.Lock()
	if p.closed || p.mode != 0 {
		p.mu.Unlock()
		reset(client)
		reset(upstream)
		return
	}
	p.forwarding[client] = upstream
	p.mu.Unlock()

	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Pass a half-close on, so that each side sees the other's end of stream.
		if tcp, ok := dst.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(upstream, client)
	go pipe(client, upstream)
	<-done
	<-done
	_ = client.Close()
	_ = upstream.Close()
	p.mu.Lock()
	delete(p.forwarding, client)
	p.mu.Unlock()
}

func (p *tcpProxy) partition(mode PartitionMode) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
	for client, upstream := range p.forwarding {
		reset(client)
		reset(upstream)
		delete(p.forwarding, client)
	}
}

func (p *tcpProxy) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = 0
	for conn := range p.held {
		reset(conn)
		delete(p.held, conn)
	}
}

func (p *tcpProxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	_ = p.listener.Close()
	p.partition(Refuse)
	p.heal()
}

// reset closes a connection with a TCP reset rather than an orderly end, as a middlebox that has
// lost its state would: the peer's next read or write fails at once.
func reset(conn net.Conn) {
	if tcp, ok := conn.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	_ = conn.Close()
}
