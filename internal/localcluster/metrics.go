package localcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// SchedulerMetrics returns the scheduler's Prometheus metrics as text.
func (c *Cluster) SchedulerMetrics(ctx context.Context) (string, error) {
	config := rest.CopyConfig(c.Config)
	config.Host = fmt.Sprintf("https://127.0.0.1:%d", c.Port(Scheduler))
	// The scheduler serves with a self-signed certificate; the client still authenticates.
	config.CAData = nil
	config.Insecure = true
	config.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	client, err := rest.UnversionedRESTClientFor(config)
	if err != nil {
		return "", err
	}
	data, err := client.Get().AbsPath("/metrics").DoRaw(ctx)
	return string(data), err
}

// ControllersMetrics returns the metrics of one controllers replica (e.g. Controllers), read as
// Prometheus would: over HTTPS, with the token of an account bound to the shipped
// tephra-metrics-reader ClusterRole.
func (c *Cluster) ControllersMetrics(ctx context.Context, replica string) (string, error) {
	token, err := c.ServiceAccountToken(ctx, "kube-system", "tephra-metrics-scraper", "tephra-metrics-reader")
	if err != nil {
		return "", err
	}
	return c.getMetrics(ctx, c.Port(replica+"/metrics"), token)
}

// getMetrics reads https://127.0.0.1:port/metrics with a bearer token ("" for none); an answer
// other than 200 is an error that carries its status.
func (c *Cluster) getMetrics(ctx context.Context, port int, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
	if err != nil {
		return "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The endpoint's certificate is self-signed, as in a pod without a mounted one.
	httpClient := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed local endpoint
	resp, err := httpClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", &MetricsError{Status: resp.StatusCode, Body: strings.TrimSpace(string(body))}
	}
	return string(body), nil
}

// ControllersMetricsAs reads a controllers replica's metrics with the given bearer token ("" for
// none), to check who the endpoint lets in.
func (c *Cluster) ControllersMetricsAs(ctx context.Context, replica, token string) (string, error) {
	return c.getMetrics(ctx, c.Port(replica+"/metrics"), token)
}

// MetricsError is a metrics endpoint's refusal.
type MetricsError struct {
	Status int
	Body   string
}

func (e *MetricsError) Error() string { return fmt.Sprintf("metrics: HTTP %d: %s", e.Status, e.Body) }
