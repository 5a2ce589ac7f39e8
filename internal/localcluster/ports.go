package localcluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Every component of a local cluster listens on a port picked when the cluster needs it, often
// well before the component binds it (kube-controller-manager's, at the cluster's start, is bound
// a minute later on a busy machine). Until then the port looks free to every other check, so
// clusters started side by side, in this process (StartMultiKueue) or in others (e2e packages run
// in parallel), would draw the same one now and then, and a component would fail with "address
// already in use". So a port is claimed when it is picked: in this process (handedOut) and, for
// the others, by a file named after it in portClaims holding this process's id, removed when the
// cluster stops. A claim whose process is gone is stale and taken over.

// handedOut are the ports picked by any cluster of this process.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// portClaims is the folder of claims shared by the processes of this machine.
var portClaims = filepath.Join(os.TempDir(), "tephra-localcluster-ports")

// freePort picks a port that nothing listens on and no local cluster of any process holds, and
// claims it.
func freePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	if err := os.MkdirAll(portClaims, 0o777); err != nil {
		return 0, fmt.Errorf("port claims: %w", err)
	}
	for range 1000 {
		port := 10000 + rand.IntN(22000)
		if handedOut.ports[port] || !claimPort(port) {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			releasePort(port)
			continue
		}
		_ = l.Close()
		handedOut.ports[port] = true
		return port, nil
	}
	return 0, errors.New("no free port found between 10000 and 32000")
}

// claimPort creates the port's claim for this process, unless a live process holds it.
func claimPort(port int) bool {
	path := filepath.Join(portClaims, strconv.Itoa(port))
	for range 2 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			_, werr := fmt.Fprint(f, os.Getpid())
			if cerr := f.Close(); werr != nil || cerr != nil {
				_ = os.Remove(path)
				return false
			}
			return true
		}
		if !errors.Is(err, os.ErrExist) {
			return false
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && pid > 0 && alive(pid) {
			return false
		}
		_ = os.Remove(path) // stale: its process is gone; claim it on the next try
	}
	return false
}

// releasePort removes this process's claim of a port.
func releasePort(port int) {
	path := filepath.Join(portClaims, strconv.Itoa(port))
	if data, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(data)) == strconv.Itoa(os.Getpid()) {
		_ = os.Remove(path)
	}
}

// releasePorts gives back the ports of a stopped cluster.
func (c *Cluster) releasePorts() {
	c.portsMu.Lock()
	defer c.portsMu.Unlock()
	handedOut.Lock()
	defer handedOut.Unlock()
	for _, port := range c.ports {
		releasePort(port)
		delete(handedOut.ports, port)
	}
}

// alive says whether a process exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
