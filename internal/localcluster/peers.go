package localcluster

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// The controller managers of other projects that users run beside Tephra (Kueue, LeaderWorkerSet)
// run beside it where a test needs them, as a platform team runs them:
//   - their release, built from their module in its own module graph;
//   - installed from what their module ships (a kustomization or a Helm chart): CRDs, RBAC,
//     webhooks, their ConfigMap;
//   - their controller manager run as a local process, as its ServiceAccount, with the
//     container's arguments and the configuration of its ConfigMap.
//
// What differs between a pod and a process on a shared host is substituted, as for Tephra's own
// components (components.go): the addresses it listens on and its certificate folder in its
// configuration, and how the apiserver reaches its webhooks. Each keeps its own webhook
// certificate as shipped (internalCertManagement, the certificate rotator of
// open-policy-agent/cert-controller): it signs a certificate for its Service's DNS name, stores
// it in a Secret and writes its CA into its webhook configurations. The Secret is kept as files
// in its certificate folder, as the kubelet keeps a Secret volume (the rotator waits for that).
// The apiserver calls a url instead of the Service, that of a TLS proxy standing in for the
// Service network: the proxy presents a certificate for 127.0.0.1 signed by the peer's own CA
// (from its Secret) and forwards to the peer's webhook server, checking the peer's certificate
// against the Service's DNS name.

// peer is what the local cluster needs to know of another project's controller manager.
type peer struct {
	name           string // its process, log file and ports
	namespace      string // where its manifests install it
	configMap      string // the ConfigMap holding its configuration file, under configKey
	configKey      string
	certSecret     string // the Secret its certificate rotator keeps its CA and certificate in
	webhookService string // the Service its webhooks call
	defaultCertDir string // where it reads its certificate unless its configuration says
	// fixedCertDir is where its certificate rotator waits for its certificate whatever its
	// configuration says ("": the folder its configuration names, one per cluster). A fixed
	// one is shared by the host's clusters, which take turns (a file lock).
	fixedCertDir string
	container    string // its controller manager's container in its Deployment
	drop         []string
	binary       func(*Binaries) string
	// render renders the manifests it ships, as its install guide has them applied.
	render func(ctx context.Context, c *Cluster) ([]byte, error)
	// configure changes its configuration, after the local addresses are set: what a test asks
	// for (Options).
	configure func(c *Cluster, config map[string]any) error
	// args are added to its container's arguments.
	args func(c *Cluster) []string
}

// peerInstall is what a peer's manifests hold, made local.
type peerInstall struct {
	*installation
	peer   *peer
	config map[string]any // its configuration, from its ConfigMap
	proxy  *webhookProxy
	// mountedSecret is the Secret its Deployment mounts where it reads its webhook certificate;
	// stopCerts stops copying it to the local folder.
	mountedSecret string
	stopCerts     context.CancelFunc
	// unlock releases the host's fixed certificate folder (peer.fixedCertDir).
	unlock func()
}

// certDir is the folder where a peer of this cluster reads its webhook certificate.
func (c *Cluster) certDir(p *peer) string {
	if p.fixedCertDir != "" {
		return p.fixedCertDir
	}
	return filepath.Join(c.opts.Dir, "pods", p.name, "certs")
}

// buildPeer builds a peer's controller manager under root/bin as name-version (once per version,
// kept) with build, and returns it with its module's folder, which holds what it ships.
func buildPeer(ctx context.Context, root string, log io.Writer, name, module, version string, build func(out string) error) (bin, dir string, err error) {
	binDir := filepath.Join(root, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", "", err
	}
	unlock, err := lockFile(filepath.Join(binDir, ".build.lock"))
	if err != nil {
		return "", "", err
	}
	defer unlock()
	bin = filepath.Join(binDir, name+"-"+version)
	if _, err := os.Stat(bin); err != nil {
		fmt.Fprintf(log, "building %s %s (once; cached in bin/)\n", name, version)
		if err := build(bin); err != nil {
			return "", "", err
		}
	}
	if dir, err = moduleDir(ctx, module, version); err != nil {
		return "", "", err
	}
	return bin, dir, nil
}

// peers are the peers this cluster runs, in the order they start.
func (c *Cluster) peers() []*peer {
	var out []*peer
	if c.opts.Kueue != nil {
		out = append(out, kueuePeer)
	}
	if c.opts.LWS != nil {
		out = append(out, lwsPeer)
	}
	if c.opts.JobSet != nil {
		out = append(out, jobSetPeer)
	}
	return out
}

// peerManifestsStep, followed by a peer's name, is the step of Start that installs its manifests.
const peerManifestsStep = "manifests:"

// peerNamed is the peer whose process is name, or nil.
func peerNamed(name string) *peer {
	for _, p := range []*peer{kueuePeer, lwsPeer, jobSetPeer} {
		if p.name == name {
			return p
		}
	}
	return nil
}

// installPeer renders a peer's manifests, points its webhooks at the proxy, starts the proxy
// and applies them.
func (c *Cluster) installPeer(ctx context.Context, p *peer) error {
	for _, port := range []string{"/webhook", "/probe", "/metrics", "/proxy"} {
		if _, err := c.port(p.name + port); err != nil {
			return err
		}
	}
	data, err := p.render(ctx, c)
	if err != nil {
		return err
	}
	in, err := peerManifests(data, p, fmt.Sprintf("https://127.0.0.1:%d", c.Port(p.name+"/proxy")))
	if err != nil {
		return err
	}
	in.unlock = func() {}
	if p.fixedCertDir != "" {
		fmt.Fprintf(c.log, "%s: waiting for the host's %s (another cluster's %s may hold it)\n", p.name, p.fixedCertDir, p.name)
		if in.unlock, err = lockFile(filepath.Join(os.TempDir(), "tephra-"+p.name+"-certs.lock")); err != nil {
			return err
		}
		// Files an earlier cluster left there are overwritten by this one's Secret (mountSecret);
		// until then the rotator finds them stale and waits.
	}
	if in.proxy, err = c.startWebhookProxy(p); err != nil {
		in.unlock()
		return err
	}
	var syncCtx context.Context
	syncCtx, in.stopCerts = context.WithCancel(context.Background())
	go c.mountSecret(syncCtx, p.namespace, in.mountedSecret, c.certDir(p))
	c.mu.Lock()
	if c.peerInstalls == nil {
		c.peerInstalls = map[string]*peerInstall{}
	}
	c.peerInstalls[p.name] = in
	c.mu.Unlock()
	return c.install(ctx, in.installation)
}

// stopPeers stops the proxies and Secret copies of the installed peers (their processes are
// stopped as components).
func (c *Cluster) stopPeers() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, in := range c.peerInstalls {
		in.proxy.close()
		in.stopCerts()
		in.unlock()
	}
}

// peerWebhooksServed says why the apiserver cannot call a peer's webhooks yet (nil once it can):
// its certificate rotator has not written its CA into each of its webhook configurations, or its
// webhook server does not answer through the proxy (which it does with 404 for a path it does not
// serve).
func (c *Cluster) peerWebhooksServed(ctx context.Context, p *peer) error {
	c.mu.Lock()
	in := c.peerInstalls[p.name]
	c.mu.Unlock()
	if in == nil {
		return fmt.Errorf("%s: not installed", p.name)
	}
	for _, obj := range in.objects {
		var bundles [][]byte
		switch obj.GetKind() {
		case "MutatingWebhookConfiguration":
			config, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, w := range config.Webhooks {
				bundles = append(bundles, w.ClientConfig.CABundle)
			}
		case "ValidatingWebhookConfiguration":
			config, err := c.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, obj.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, w := range config.Webhooks {
				bundles = append(bundles, w.ClientConfig.CABundle)
			}
		}
		for _, b := range bundles {
			if len(b) == 0 {
				return fmt.Errorf("%s: its CA is not in %s %s yet", p.name, obj.GetKind(), obj.GetName())
			}
		}
	}
	client := &http.Client{
		Timeout:   5 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // a local probe of the proxy
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/", c.Port(p.name+"/proxy")), nil)
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s webhook proxy: %w", p.name, err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable {
		return fmt.Errorf("%s webhook server, through its proxy: %s", p.name, resp.Status)
	}
	return nil
}

// mountSecret keeps a folder holding a Secret's keys as files, as the kubelet keeps a Secret
// volume (a certificate rotator waits until the certificate it wrote to the Secret is mounted),
// until ctx ends.
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

// peerManifests reads a peer's rendered manifests and makes them local: the kinds it drops left
// out, and every webhook that calls its Service pointed at proxyURL instead.
func peerManifests(data []byte, p *peer, proxyURL string) (*peerInstall, error) {
	in, err := decodeManifests(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.name, err)
	}
	k := &peerInstall{peer: p, installation: &installation{deployments: in.deployments}}
	for _, obj := range in.objects {
		switch obj.GetKind() {
		case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
			if err := p.webhooksToProxy(obj, proxyURL); err != nil {
				return nil, err
			}
		case "CustomResourceDefinition":
			if err := p.conversionToProxy(obj, proxyURL); err != nil {
				return nil, err
			}
		case "ConfigMap":
			if obj.GetName() == p.configMap && obj.GetNamespace() == p.namespace {
				raw, _, _ := unstructured.NestedString(obj.Object, "data", p.configKey)
				if err := yaml.Unmarshal([]byte(raw), &k.config); err != nil {
					return nil, fmt.Errorf("%s: ConfigMap %s: %w", p.name, p.configMap, err)
				}
			}
		}
		if slices.Contains(p.drop, obj.GetKind()) {
			continue
		}
		k.objects = append(k.objects, obj)
	}
	if k.config == nil {
		return nil, fmt.Errorf("%s: the manifests hold no ConfigMap %s/%s with %s", p.name, p.namespace, p.configMap, p.configKey)
	}
	if len(k.deployments) != 1 {
		return nil, fmt.Errorf("%s: the manifests hold %d Deployments, not one", p.name, len(k.deployments))
	}
	certDir, _, _ := unstructured.NestedString(k.config, "webhook", "certDir")
	if certDir == "" {
		certDir = p.defaultCertDir
	}
	spec := k.deployments[0].Spec.Template.Spec
	for _, ctr := range spec.Containers {
		for _, mount := range ctr.VolumeMounts {
			if mount.MountPath != certDir {
				continue
			}
			for _, v := range spec.Volumes {
				if v.Name == mount.Name && v.Secret != nil {
					k.mountedSecret = v.Secret.SecretName
				}
			}
		}
	}
	if k.mountedSecret == "" {
		return nil, fmt.Errorf("%s: Deployment %s mounts no Secret at %s, where it reads its webhook certificate", p.name, k.deployments[0].Name, certDir)
	}
	return k, nil
}

// webhooksToProxy points each webhook of a configuration that calls the peer's Service at the
// proxy, with the Service's path.
func (p *peer) webhooksToProxy(obj *unstructured.Unstructured, proxyURL string) error {
	webhooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
	if err != nil {
		return fmt.Errorf("%s: %s %s: %w", p.name, obj.GetKind(), obj.GetName(), err)
	}
	for i, w := range webhooks {
		webhook, ok := w.(map[string]any)
		if !ok {
			continue
		}
		target, err := p.serviceURL(webhook, proxyURL)
		if err != nil {
			return fmt.Errorf("%s: webhook %v of %s: %w", p.name, webhook["name"], obj.GetName(), err)
		}
		if target != "" {
			webhook["clientConfig"] = map[string]any{"url": target}
			webhooks[i] = webhook
		}
	}
	return unstructured.SetNestedSlice(obj.Object, webhooks, "webhooks")
}

// conversionToProxy points a CRD's conversion webhook at the proxy.
func (p *peer) conversionToProxy(obj *unstructured.Unstructured, proxyURL string) error {
	webhook, found, err := unstructured.NestedMap(obj.Object, "spec", "conversion", "webhook")
	if err != nil || !found {
		return err
	}
	target, err := p.serviceURL(webhook, proxyURL)
	if err != nil || target == "" {
		return err
	}
	webhook["clientConfig"] = map[string]any{"url": target}
	return unstructured.SetNestedMap(obj.Object, webhook, "spec", "conversion", "webhook")
}

// serviceURL is the proxy's url for a webhook that calls the peer's webhook Service ("" if it
// calls none).
func (p *peer) serviceURL(webhook map[string]any, proxyURL string) (string, error) {
	service, found, err := unstructured.NestedMap(webhook, "clientConfig", "service")
	if err != nil || !found {
		return "", err
	}
	name, _, _ := unstructured.NestedString(service, "name")
	namespace, _, _ := unstructured.NestedString(service, "namespace")
	if name != p.webhookService || namespace != p.namespace {
		return "", fmt.Errorf("calls Service %s/%s, not %s/%s", namespace, name, p.namespace, p.webhookService)
	}
	path, _, _ := unstructured.NestedString(service, "path")
	return proxyURL + path, nil
}

// peerCommand is the command line of a peer's controller manager: its container's arguments,
// with its configuration file made local, as its ServiceAccount.
func (c *Cluster) peerCommand(ctx context.Context, p *peer) (bin string, args, env []string, err error) {
	c.mu.Lock()
	in := c.peerInstalls[p.name]
	c.mu.Unlock()
	if in == nil || len(in.deployments) != 1 {
		return "", nil, nil, fmt.Errorf("%s: not installed, or its manifests hold other than one Deployment", p.name)
	}
	d := in.deployments[0]
	var containerArgs []string
	found := false
	for _, ctr := range d.Spec.Template.Spec.Containers {
		if ctr.Name != p.container {
			continue
		}
		found = true
		if len(ctr.Command) > 1 {
			containerArgs = append(containerArgs, ctr.Command[1:]...)
		}
		containerArgs = append(containerArgs, ctr.Args...)
	}
	if !found {
		return "", nil, nil, fmt.Errorf("%s: Deployment %s has no container named %s", p.name, d.Name, p.container)
	}
	kubeconfig, err := c.ServiceAccountKubeconfig(ctx, d.Namespace, d.Spec.Template.Spec.ServiceAccountName)
	if err != nil {
		return "", nil, nil, fmt.Errorf("%s: %w", p.name, err)
	}
	configFile, err := c.writePeerConfig(p, in.config)
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
		return "", nil, nil, fmt.Errorf("%s: Deployment %s does not pass --config", p.name, d.Name)
	}
	if p.args != nil {
		args = append(args, p.args(c)...)
	}
	// In a pod, the in-cluster config.
	return p.binary(c.bins), args, []string{"KUBECONFIG=" + kubeconfig}, nil
}

// writePeerConfig writes a peer's configuration with local addresses and folders, and what the
// test asks for, and returns its path.
func (c *Cluster) writePeerConfig(p *peer, shipped map[string]any) (string, error) {
	dir := filepath.Join(c.opts.Dir, "pods", p.name)
	if err := os.MkdirAll(filepath.Join(dir, "certs"), 0o755); err != nil {
		return "", err
	}
	config := runtime.DeepCopyJSON(shipped)
	set := func(value any, fields ...string) error {
		return unstructured.SetNestedField(config, value, fields...)
	}
	for _, err := range []error{
		set(int64(c.Port(p.name+"/webhook")), "webhook", "port"),
		set("127.0.0.1", "webhook", "host"),
		set(c.certDir(p), "webhook", "certDir"),
		set(fmt.Sprintf("127.0.0.1:%d", c.Port(p.name+"/probe")), "health", "healthProbeBindAddress"),
		set(fmt.Sprintf("127.0.0.1:%d", c.Port(p.name+"/metrics")), "metrics", "bindAddress"),
		// In a pod, controller-runtime reads its namespace from the service account mount.
		set(p.namespace, "leaderElection", "resourceNamespace"),
	} {
		if err != nil {
			return "", fmt.Errorf("%s configuration: %w", p.name, err)
		}
	}
	if p.configure != nil {
		if err := p.configure(c, config); err != nil {
			return "", fmt.Errorf("%s configuration: %w", p.name, err)
		}
	}
	data, err := yaml.Marshal(config)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, p.configKey)
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
