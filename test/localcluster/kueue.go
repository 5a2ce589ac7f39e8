package localcluster

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Kueue (sigs.k8s.io/kueue) runs beside Tephra where a test needs it (Options.Kueue), as a
// platform team runs it:
//   - its release, built from its module in its own module graph with `go install`, as kwok is;
//   - installed from the kustomization its module ships (config/default, which its release
//     manifests are built from): CRDs, RBAC, webhooks, its ConfigMap;
//   - its controller manager run as a local process, as its ServiceAccount, with the container's
//     arguments and the configuration of its ConfigMap.
//
// What differs between a pod and a process on a shared host is substituted, as for Tephra's own
// components (components.go): the addresses it listens on and its certificate folder in its
// configuration, and how the apiserver reaches its webhooks. Kueue keeps its own webhook
// certificate as shipped (internalCertManagement): it signs a certificate for its Service's DNS
// name and writes its CA into the webhook configurations and CRDs. The apiserver calls a url
// instead of the Service, that of a TLS proxy standing in for the Service network: the proxy
// presents a certificate for 127.0.0.1 signed by Kueue's own CA (from Kueue's Secret) and
// forwards to Kueue's webhook server, checking Kueue's certificate against the Service's DNS
// name. The visibility API (an APIService that only the Service network reaches) is left out,
// with Kueue's VisibilityOnDemand gate off.

const (
	// KueueVersion is the Kueue release that runs beside Tephra where a test needs it. Kueue is
	// built in its own module graph (`go install`), so it is pinned here rather than in go.mod.
	KueueVersion = "v0.17.0"
	// Kueue names Kueue's controller manager: its process and log file.
	Kueue = "kueue"

	kueueModule         = "sigs.k8s.io/kueue"
	kueueNamespace      = "kueue-system"
	kueueConfigMap      = "kueue-manager-config"
	kueueConfigKey      = "controller_manager_config.yaml"
	kueueCertSecret     = "kueue-webhook-server-cert"
	kueueWebhookService = "kueue-webhook-service"
	// kueueDefaultCertDir is where Kueue reads its webhook certificate unless its configuration
	// says otherwise (webhook.certDir), and where its Deployment mounts the Secret.
	kueueDefaultCertDir = "/tmp/k8s-webhook-server/serving-certs"
)

// KueueOptions runs Kueue beside Tephra (Options.Kueue).
type KueueOptions struct {
	// ExternalFrameworks are added to integrations.externalFrameworks of Kueue's configuration
	// (Kind.version.group), e.g. "Job.v1alpha1.batch.tephra.dev".
	ExternalFrameworks []string
	// FeatureGates are added to Kueue's --feature-gates.
	FeatureGates string
	// Configuration is merged into Kueue's configuration (maps field by field, anything else
	// replaced), e.g. {"multiKueue": {"workerLostTimeout": "30s"}}; JSON values only (int64, not
	// int).
	Configuration map[string]any
}

// BuildKueue builds Kueue's controller manager under root/bin (once per version, kept) and
// returns it with its module's folder, which holds the manifests it ships.
func BuildKueue(ctx context.Context, root string, log io.Writer) (bin, module string, err error) {
	binDir := filepath.Join(root, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", "", err
	}
	unlock, err := lockFile(filepath.Join(binDir, ".build.lock"))
	if err != nil {
		return "", "", err
	}
	defer unlock()
	bin = filepath.Join(binDir, "kueue-"+KueueVersion)
	if _, err := os.Stat(bin); err != nil {
		fmt.Fprintf(log, "building kueue %s (once; cached in bin/)\n", KueueVersion)
		if err := goInstall(ctx, root, bin, kueueModule+"/cmd/kueue@"+KueueVersion, log); err != nil {
			return "", "", err
		}
	}
	if module, err = moduleDir(ctx, kueueModule, KueueVersion); err != nil {
		return "", "", err
	}
	return bin, module, nil
}

// kueueInstall is what Kueue's manifests hold, made local.
type kueueInstall struct {
	*installation
	config map[string]any // its configuration, from its ConfigMap
	proxy  *kueueWebhookProxy
	// certSecret is the Secret its Deployment mounts where Kueue reads its webhook certificate;
	// stopCerts stops copying it to the local folder.
	certSecret string
	stopCerts  context.CancelFunc
}

// installKueue renders Kueue's manifests, points its webhooks at the proxy, starts the proxy and
// applies them.
func (c *Cluster) installKueue(ctx context.Context) error {
	for _, port := range []string{Kueue + "/webhook", Kueue + "/probe", Kueue + "/metrics", Kueue + "/proxy"} {
		if _, err := c.port(port); err != nil {
			return err
		}
	}
	k, err := kueueManifests(ctx, c.bins.KueueModule, fmt.Sprintf("https://127.0.0.1:%d", c.Port(Kueue+"/proxy")))
	if err != nil {
		return err
	}
	if k.proxy, err = c.startKueueWebhookProxy(); err != nil {
		return err
	}
	var syncCtx context.Context
	syncCtx, k.stopCerts = context.WithCancel(context.Background())
	go c.mountSecret(syncCtx, kueueNamespace, k.certSecret, filepath.Join(c.opts.Dir, "pods", Kueue, "certs"))
	c.mu.Lock()
	c.kueue = k
	c.mu.Unlock()
	return c.install(ctx, k.installation)
}

// mountSecret keeps a folder holding a Secret's keys as files, as the kubelet keeps a Secret
// volume (Kueue's certificate rotator waits until the certificate it wrote to the Secret is
// mounted), until ctx ends.
func (c *Cluster) mountSecret(ctx context.Context, namespace, name, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(c.log, "mounting Secret %s/%s: %v\n", namespace, name, err)
		return
	}
	written := map[string][]byte{}
	for {
		secret, err := c.Client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			for key, value := range secret.Data {
				if bytes.Equal(written[key], value) {
					continue
				}
				tmp := filepath.Join(dir, "."+key+".tmp")
				if os.WriteFile(tmp, value, 0o600) == nil && os.Rename(tmp, filepath.Join(dir, key)) == nil {
					written[key] = value
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// kueueManifests renders the kustomization Kueue's module ships (config/default) and makes it
// local: the visibility APIService left out, and every webhook that calls Kueue's Service
// pointed at proxyURL instead.
func kueueManifests(ctx context.Context, module, proxyURL string) (*kueueInstall, error) {
	data, err := KustomizeManifests(filepath.Join(module, "config", "default"))(ctx, "")
	if err != nil {
		return nil, err
	}
	in, err := decodeManifests(data)
	if err != nil {
		return nil, fmt.Errorf("kueue: %w", err)
	}
	k := &kueueInstall{installation: &installation{deployments: in.deployments}}
	for _, obj := range in.objects {
		switch obj.GetKind() {
		case "APIService":
			continue // the visibility API: see above
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			if err := kueueWebhooksToProxy(obj, proxyURL); err != nil {
				return nil, err
			}
		case "CustomResourceDefinition":
			if err := kueueConversionToProxy(obj, proxyURL); err != nil {
				return nil, err
			}
		case "ConfigMap":
			if obj.GetName() == kueueConfigMap && obj.GetNamespace() == kueueNamespace {
				raw, _, _ := unstructured.NestedString(obj.Object, "data", kueueConfigKey)
				if err := yaml.Unmarshal([]byte(raw), &k.config); err != nil {
					return nil, fmt.Errorf("kueue: ConfigMap %s: %w", kueueConfigMap, err)
				}
			}
		}
		k.objects = append(k.objects, obj)
	}
	if k.config == nil {
		return nil, fmt.Errorf("kueue: the manifests hold no ConfigMap %s/%s with %s", kueueNamespace, kueueConfigMap, kueueConfigKey)
	}
	if len(k.deployments) != 1 {
		return nil, fmt.Errorf("kueue: the manifests hold %d Deployments, not one", len(k.deployments))
	}
	certDir, _, _ := unstructured.NestedString(k.config, "webhook", "certDir")
	if certDir == "" {
		certDir = kueueDefaultCertDir
	}
	spec := k.deployments[0].Spec.Template.Spec
	for _, ctr := range spec.Containers {
		for _, mount := range ctr.VolumeMounts {
			if mount.MountPath != certDir {
				continue
			}
			for _, v := range spec.Volumes {
				if v.Name == mount.Name && v.Secret != nil {
					k.certSecret = v.Secret.SecretName
				}
			}
		}
	}
	if k.certSecret == "" {
		return nil, fmt.Errorf("kueue: Deployment %s mounts no Secret at %s, where Kueue reads its webhook certificate", k.deployments[0].Name, certDir)
	}
	return k, nil
}

// kueueWebhooksToProxy points each webhook of a configuration that calls Kueue's Service at the
// proxy, with the Service's path.
func kueueWebhooksToProxy(obj *unstructured.Unstructured, proxyURL string) error {
	webhooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
	if err != nil {
		return fmt.Errorf("kueue: %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	for i, w := range webhooks {
		webhook, ok := w.(map[string]any)
		if !ok {
			continue
		}
		target, err := kueueServiceURL(webhook, proxyURL)
		if err != nil {
			return fmt.Errorf("kueue: webhook %v of %s: %w", webhook["name"], obj.GetName(), err)
		}
		if target != "" {
			webhook["clientConfig"] = map[string]any{"url": target}
			webhooks[i] = webhook
		}
	}
	return unstructured.SetNestedSlice(obj.Object, webhooks, "webhooks")
}

// kueueConversionToProxy points a CRD's conversion webhook at the proxy.
func kueueConversionToProxy(obj *unstructured.Unstructured, proxyURL string) error {
	webhook, found, err := unstructured.NestedMap(obj.Object, "spec", "conversion", "webhook")
	if err != nil || !found {
		return err
	}
	target, err := kueueServiceURL(webhook, proxyURL)
	if err != nil || target == "" {
		return err
	}
	webhook["clientConfig"] = map[string]any{"url": target}
	return unstructured.SetNestedMap(obj.Object, webhook, "spec", "conversion", "webhook")
}

// kueueServiceURL is the proxy's url for a webhook that calls Kueue's webhook Service ("" if it
// calls none).
func kueueServiceURL(webhook map[string]any, proxyURL string) (string, error) {
	service, found, err := unstructured.NestedMap(webhook, "clientConfig", "service")
	if err != nil || !found {
		return "", err
	}
	name, _, _ := unstructured.NestedString(service, "name")
	namespace, _, _ := unstructured.NestedString(service, "namespace")
	if name != kueueWebhookService || namespace != kueueNamespace {
		return "", fmt.Errorf("calls Service %s/%s, not Kueue's %s/%s", namespace, name, kueueNamespace, kueueWebhookService)
	}
	path, _, _ := unstructured.NestedString(service, "path")
	return proxyURL + path, nil
}

// kueueCommand is the command line of Kueue's controller manager: its container's arguments, with
// its configuration file made local, as its ServiceAccount.
func (c *Cluster) kueueCommand(ctx context.Context) (bin string, args, env []string, err error) {
	c.mu.Lock()
	k := c.kueue
	c.mu.Unlock()
	if k == nil || len(k.deployments) != 1 {
		return "", nil, nil, errors.New("kueue: not installed, or its manifests hold other than one Deployment")
	}
	d := k.deployments[0]
	var containerArgs []string
	found := false
	for _, ctr := range d.Spec.Template.Spec.Containers {
		if ctr.Name != "manager" {
			continue
		}
		found = true
		if len(ctr.Command) > 1 {
			containerArgs = append(containerArgs, ctr.Command[1:]...)
		}
		containerArgs = append(containerArgs, ctr.Args...)
	}
	if !found {
		return "", nil, nil, fmt.Errorf("kueue: Deployment %s has no container named manager", d.Name)
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, d.Namespace, d.Spec.Template.Spec.ServiceAccountName)
	if err != nil {
		return "", nil, nil, fmt.Errorf("kueue: %w", err)
	}
	configFile, err := c.writeKueueConfig(k.config)
	if err != nil {
		return "", nil, nil, err
	}
	configured := false
	for _, arg := range containerArgs {
		if strings.HasPrefix(arg, "--config=") {
			arg, configured = "--config="+configFile, true
		}
		args = append(args, arg)
	}
	if !configured {
		return "", nil, nil, fmt.Errorf("kueue: Deployment %s does not pass --config", d.Name)
	}
	gates := "VisibilityOnDemand=false"
	if c.opts.Kueue.FeatureGates != "" {
		gates += "," + c.opts.Kueue.FeatureGates
	}
	args = append(args, "--feature-gates="+gates)
	// In a pod, the in-cluster config.
	return c.bins.Kueue, args, []string{"KUBECONFIG=" + kubeconfig}, nil
}

// writeKueueConfig writes Kueue's configuration with local addresses and folders and the
// external frameworks of Options.Kueue, and returns its path.
func (c *Cluster) writeKueueConfig(shipped map[string]any) (string, error) {
	dir := filepath.Join(c.opts.Dir, "pods", Kueue)
	if err := os.MkdirAll(filepath.Join(dir, "certs"), 0o755); err != nil {
		return "", err
	}
	config := runtime.DeepCopyJSON(shipped)
	set := func(value any, fields ...string) error {
		return unstructured.SetNestedField(config, value, fields...)
	}
	for _, err := range []error{
		set(int64(c.Port(Kueue+"/webhook")), "webhook", "port"),
		set("127.0.0.1", "webhook", "host"),
		set(filepath.Join(dir, "certs"), "webhook", "certDir"),
		set(fmt.Sprintf("127.0.0.1:%d", c.Port(Kueue+"/probe")), "health", "healthProbeBindAddress"),
		set(fmt.Sprintf("127.0.0.1:%d", c.Port(Kueue+"/metrics")), "metrics", "bindAddress"),
		// In a pod, controller-runtime reads its namespace from the service account mount.
		set(kueueNamespace, "leaderElection", "resourceNamespace"),
	} {
		if err != nil {
			return "", fmt.Errorf("kueue configuration: %w", err)
		}
	}
	if external := c.opts.Kueue.ExternalFrameworks; len(external) > 0 {
		existing, _, _ := unstructured.NestedStringSlice(config, "integrations", "externalFrameworks")
		if err := unstructured.SetNestedStringSlice(config, append(existing, external...), "integrations", "externalFrameworks"); err != nil {
			return "", fmt.Errorf("kueue configuration: %w", err)
		}
	}
	if c.opts.Kueue.Configuration != nil {
		mergeInto(config, runtime.DeepCopyJSON(c.opts.Kueue.Configuration))
	}
	data, err := yaml.Marshal(config)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, kueueConfigKey)
	return path, os.WriteFile(path, data, 0o644)
}

// mergeInto merges overrides into config: maps field by field, anything else replaced.
func mergeInto(config, overrides map[string]any) {
	for k, v := range overrides {
		inner, isMap := v.(map[string]any)
		existing, wasMap := config[k].(map[string]any)
		if isMap && wasMap {
			mergeInto(existing, inner)
			continue
		}
		config[k] = v
	}
}

// kueueWebhookProxy stands in for the Service network between the apiserver and Kueue's webhook
// server (see the top of this file).
type kueueWebhookProxy struct {
	c        *Cluster
	server   *http.Server
	upstream *url.URL

	mu        sync.Mutex
	caPEM     []byte
	cert      *tls.Certificate
	transport *http.Transport
}

func (c *Cluster) startKueueWebhookProxy() (*kueueWebhookProxy, error) {
	listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", c.Port(Kueue+"/proxy")))
	if err != nil {
		return nil, fmt.Errorf("kueue webhook proxy: %w", err)
	}
	p := &kueueWebhookProxy{
		c:        c,
		upstream: &url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", c.Port(Kueue+"/webhook"))},
	}
	p.server = &http.Server{
		Handler:           p,
		TLSConfig:         &tls.Config{GetCertificate: p.certificate, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = p.server.ServeTLS(listener, "", "") }()
	return p, nil
}

func (p *kueueWebhookProxy) close() {
	if p != nil {
		_ = p.server.Close()
	}
}

// certificate presents a certificate for 127.0.0.1 signed by the CA in Kueue's Secret, issued
// again when Kueue's CA changes.
func (p *kueueWebhookProxy) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	ctx, cancel := context.WithTimeout(hello.Context(), 5*time.Second)
	defer cancel()
	secret, err := p.c.Client.CoreV1().Secrets(kueueNamespace).Get(ctx, kueueCertSecret, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("kueue webhook proxy: Kueue's certificate: %w", err)
	}
	caPEM, caKeyPEM := secret.Data["ca.crt"], secret.Data["ca.key"]
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cert != nil && bytes.Equal(caPEM, p.caPEM) {
		return p.cert, nil
	}
	cert, err := issueLocalServing(caPEM, caKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("kueue webhook proxy: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("kueue webhook proxy: Kueue's Secret holds no CA certificate")
	}
	if p.transport != nil {
		p.transport.CloseIdleConnections()
	}
	p.caPEM, p.cert = caPEM, cert
	p.transport = &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs:    pool,
		ServerName: kueueWebhookService + "." + kueueNamespace + ".svc",
		MinVersion: tls.VersionTLS12,
	}}
	return cert, nil
}

func (p *kueueWebhookProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	transport := p.transport
	p.mu.Unlock()
	if transport == nil {
		http.Error(w, "kueue webhook proxy: no certificate from Kueue yet", http.StatusServiceUnavailable)
		return
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(p.upstream) },
		Transport: transport,
	}
	proxy.ServeHTTP(w, r)
}

// issueLocalServing signs a serving certificate for 127.0.0.1 with a CA given in PEM.
func issueLocalServing(caPEM, caKeyPEM []byte) (*tls.Certificate, error) {
	caBlock, _ := pem.Decode(caPEM)
	keyBlock, _ := pem.Decode(caKeyPEM)
	if caBlock == nil || keyBlock == nil {
		return nil, errors.New("no CA certificate and key in Kueue's Secret")
	}
	ca, err := x509.ParseCertificate(caBlock.Bytes)
	if err != nil {
		return nil, err
	}
	caKey, err := parsePrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now().Add(-time.Hour)
	template := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "kueue-webhook-proxy"},
		NotBefore:    now,
		NotAfter:     ca.NotAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, template, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// parsePrivateKey reads a PKCS#1, SEC 1 or PKCS#8 private key.
func parsePrivateKey(der []byte) (any, error) {
	if key, err := x509.ParsePKCS1PrivateKey(der); err == nil {
		return key, nil
	}
	if key, err := x509.ParseECPrivateKey(der); err == nil {
		return key, nil
	}
	return x509.ParsePKCS8PrivateKey(der)
}
