package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/tephra-dev/tephra/controllers/kueue"
	"github.com/tephra-dev/tephra/controllers/queue"
	"github.com/tephra-dev/tephra/controllers/webhookcert"
)

// inClusterNamespace is where a pod finds its own namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// webhookFlags configure the admission webhooks.
type webhookFlags struct {
	bindAddress, configuration, secret string
}

// server returns the webhook server's options: where it listens, and the certificate of certs.
func (f webhookFlags) server(certs *webhookcert.Manager) (webhook.Options, error) {
	host, portText, err := net.SplitHostPort(f.bindAddress)
	if err != nil {
		return webhook.Options{}, fmt.Errorf("--webhook-bind-address %q: %w", f.bindAddress, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil {
		return webhook.Options{}, fmt.Errorf("--webhook-bind-address %q: %w", f.bindAddress, err)
	}
	return webhook.Options{Host: host, Port: port, TLSOpts: []func(*tls.Config){func(c *tls.Config) {
		c.GetCertificate = certs.GetCertificate
	}}}, nil
}

// certManager returns the manager of the webhooks' certificate, the Secret in the namespace the
// controllers run in (--leader-election-namespace, else the pod's own).
func (f webhookFlags) certManager(namespace string) (*webhookcert.Manager, error) {
	if namespace == "" {
		data, err := os.ReadFile(inClusterNamespace)
		if err != nil {
			return nil, errors.New("the webhooks' certificate Secret needs the controllers' namespace: run in a pod or set --leader-election-namespace")
		}
		namespace = strings.TrimSpace(string(data))
	}
	return &webhookcert.Manager{
		Configuration: f.configuration,
		Secret:        types.NamespacedName{Namespace: namespace, Name: f.secret},
		Log:           ctrl.Log.WithName("webhook-certificate"),
	}, nil
}

// startWebhooks registers the handlers and the manager of their certificate, which loads it
// (creating it if this replica is the first) as soon as the manager starts and keeps it. direct
// reads the Secret and the configuration without a cache.
func startWebhooks(mgr ctrl.Manager, certs *webhookcert.Manager, direct client.Client, schedulerNames []string) error {
	certs.Client = direct
	if err := mgr.Add(certs); err != nil {
		return err
	}
	resize := queue.NewResizeValidator(mgr.GetCache(), mgr.GetScheme(), schedulerNames)
	if err := resize.ReadUpstream(mgr); err != nil {
		return err
	}
	mgr.GetWebhookServer().Register(queue.ResizePath, &webhook.Admission{Handler: resize})
	mgr.GetWebhookServer().Register(kueue.SuspendPath, &webhook.Admission{
		Handler: &kueue.SuspendDefaulter{Decoder: admission.NewDecoder(mgr.GetScheme()), Reader: mgr.GetClient()},
	})
	return nil
}
