package localcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/tephra-dev/tephra/apis/client/clientset/versioned"
)

func (c *Cluster) waitHealthy(ctx context.Context, name string, p *process) error {
	var url string
	switch name {
	case Etcd:
		url = fmt.Sprintf("http://127.0.0.1:%d/health", c.Port("etcd-client"))
	case APIServer:
		url = fmt.Sprintf("https://127.0.0.1:%d/readyz", c.Port(APIServer))
	case ControllerManager:
		url = fmt.Sprintf("https://127.0.0.1:%d/healthz", c.Port(ControllerManager))
	case Kwok:
		url = fmt.Sprintf("http://127.0.0.1:%d/healthz", c.Port(Kwok))
	}
	if peerNamed(name) != nil {
		url = fmt.Sprintf("http://127.0.0.1:%d/readyz", c.Port(name+"/probe"))
	}
	switch component, _ := componentOf(name); component {
	case Scheduler:
		url = fmt.Sprintf("https://127.0.0.1:%d/readyz", c.Port(name))
	case Controllers:
		url = fmt.Sprintf("http://127.0.0.1:%d/readyz", c.Port(name+"/probe"))
	}
	httpClient := &http.Client{
		Timeout: 5 * time.Second,
		// Health endpoints of local components; the apiserver's /readyz is public.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // local health probe
	}
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if exited, err := p.exited(); exited {
			lastErr = nil
			return false, fmt.Errorf("%s exited: %w", name, err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := httpClient.Do(req)
		if err != nil {
			lastErr = err
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			lastErr = fmt.Errorf("%s: %s: %s", url, resp.Status, body)
			return false, nil
		}
		if component, _ := componentOf(name); component == Controllers {
			// controller-runtime answers /readyz before its metrics server listens; a
			// test that scrapes right after a (re)start must find it.
			conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", c.Port(name+"/metrics")))
			if err != nil {
				lastErr = fmt.Errorf("metrics endpoint: %w", err)
				return false, nil
			}
			_ = conn.Close()
		}
		if peer := peerNamed(name); peer != nil {
			// Some answer /readyz before their webhooks can be called (LeaderWorkerSet's is a
			// ping): a test's first object would be refused.
			if err := c.peerWebhooksServed(ctx, peer); err != nil {
				lastErr = err
				return false, nil
			}
		}
		return true, nil
	})
	switch {
	case err == nil:
		return nil
	case lastErr != nil:
		return fmt.Errorf("waiting for %s to be healthy: %w (last: %w)", name, err, lastErr)
	default:
		return fmt.Errorf("waiting for %s to be healthy: %w", name, err)
	}
}

// connect writes the admin kubeconfig and the clients, once the apiserver is up.
func (c *Cluster) connect() error {
	caData, err := os.ReadFile(c.pki.CACert)
	if err != nil {
		return err
	}
	certData, err := os.ReadFile(c.pki.AdminCert)
	if err != nil {
		return err
	}
	keyData, err := os.ReadFile(c.pki.AdminKey)
	if err != nil {
		return err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", c.Port(APIServer))
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["tephra"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caData}
	kubeconfig.AuthInfos["tephra-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: certData, ClientKeyData: keyData}
	kubeconfig.Contexts["tephra"] = &clientcmdapi.Context{Cluster: "tephra", AuthInfo: "tephra-admin"}
	kubeconfig.CurrentContext = "tephra"
	if err := clientcmd.WriteToFile(*kubeconfig, c.Kubeconfig); err != nil {
		return err
	}
	c.Config = &rest.Config{
		Host:            server,
		TLSClientConfig: rest.TLSClientConfig{CAData: caData, CertData: certData, KeyData: keyData},
		QPS:             500,
		Burst:           1000,
	}
	if c.Client, err = kubernetes.NewForConfig(c.Config); err != nil {
		return err
	}
	c.Tephra, err = versioned.NewForConfig(c.Config)
	return err
}

// freePort picks a free port below Linux's ephemeral range (32768 and up by default). A port the
// kernel hands out for ":0" is an ephemeral one, which any outgoing connection on the machine may
// take as its local port before the component that was meant to listen on it starts: with several
// clusters starting side by side (go test runs packages in parallel), that happened.
// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
