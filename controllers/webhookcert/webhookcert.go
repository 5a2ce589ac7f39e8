// Package webhookcert keeps the serving certificate of Tephra's admission webhooks without
// cert-manager: a self-signed CA and a serving certificate live in one Secret that every replica
// of tephra-controllers shares, and the caBundle of the ValidatingWebhookConfiguration that calls
// them is kept equal to that CA. The certificate names whatever the configuration calls (its
// Services' DNS names, or the host of a url), so it is right for any installation of the
// manifests or the chart without a flag per namespace.
package webhookcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sort"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	certutil "k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// CAKey holds the CA's certificate in the Secret, beside tls.crt (the serving certificate
	// followed by the CA) and tls.key.
	CAKey = "ca.crt"
	// validity is how long a generated certificate lasts; renewBefore is how long before its end
	// a new one replaces it.
	validity    = 365 * 24 * time.Hour
	renewBefore = 30 * 24 * time.Hour
	// retryInterval is how soon a failed check is tried again.
	retryInterval = 5 * time.Second
)

// Manager serves the certificate of the Secret and keeps the configuration's caBundle on its CA.
// Every replica runs one: they all serve the webhooks (the Service spreads calls over them), so
// none waits for the leader.
type Manager struct {
	// Client reads and writes the Secret and the configuration directly: the controllers cache
	// neither (a cluster's Secrets are not theirs to hold in memory).
	Client client.Client
	// Configuration names the ValidatingWebhookConfiguration whose webhooks this process serves.
	Configuration string
	// Secret holds the CA and the serving certificate.
	Secret types.NamespacedName
	// Interval is how often the certificate's validity and the caBundle are checked again.
	Interval time.Duration
	Log      logr.Logger

	cert atomic.Pointer[tls.Certificate]
}

// GetCertificate serves the certificate last read from the Secret (tls.Config.GetCertificate).
func (m *Manager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	cert := m.cert.Load()
	if cert == nil {
		return nil, errors.New("the webhook's serving certificate is not loaded yet")
	}
	return cert, nil
}

// NeedLeaderElection is false: every replica serves the webhooks.
func (m *Manager) NeedLeaderElection() bool { return false }

// Start loads the certificate at once and checks it and the caBundle every Interval until ctx
// ends (a manager Runnable). Errors are logged and retried within retryInterval: the webhooks fail
// open, so until the certificate is there a resize is charged but never refused.
func (m *Manager) Start(ctx context.Context) error {
	interval := m.Interval
	if interval == 0 {
		interval = time.Minute
	}
	for {
		next := interval
		if err := m.Ensure(ctx); err != nil {
			m.Log.Error(err, "cannot keep the webhooks' certificate", "secret", m.Secret, "configuration", m.Configuration)
			next = min(interval, retryInterval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(next):
		}
	}
}

// Ensure makes the Secret hold a CA and a certificate valid for every host the configurations
// call for at least renewBefore, loads it, and sets every webhook's caBundle to the CA. The
// MutatingWebhookConfiguration of the same name is optional (an install may leave it out).
func (m *Manager) Ensure(ctx context.Context) error {
	var validating admissionregistrationv1.ValidatingWebhookConfiguration
	if err := m.Client.Get(ctx, types.NamespacedName{Name: m.Configuration}, &validating); err != nil {
		return fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", m.Configuration, err)
	}
	configs := []client.Object{&validating}
	var mutating admissionregistrationv1.MutatingWebhookConfiguration
	switch err := m.Client.Get(ctx, types.NamespacedName{Name: m.Configuration}, &mutating); {
	case err == nil:
		configs = append(configs, &mutating)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("reading MutatingWebhookConfiguration %s: %w", m.Configuration, err)
	}
	hosts := Hosts(configs...)
	if len(hosts) == 0 {
		return fmt.Errorf("ValidatingWebhookConfiguration %s calls no service or url", m.Configuration)
	}
	secret, err := m.secret(ctx, hosts)
	if err != nil {
		return err
	}
	cert, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return fmt.Errorf("secret %s: %w", m.Secret, err)
	}
	m.cert.Store(&cert)
	for _, config := range configs {
		if err := m.setCABundle(ctx, config, secret.Data[CAKey]); err != nil {
			return err
		}
	}
	return nil
}

// secret returns the Secret, created or renewed first when it holds no certificate valid for
// hosts. Replicas that start together race to create it: the loser reads the winner's.
func (m *Manager) secret(ctx context.Context, hosts []string) (*corev1.Secret, error) {
	var secret corev1.Secret
	err := m.Client.Get(ctx, m.Secret, &secret)
	switch {
	case apierrors.IsNotFound(err):
		secret = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: m.Secret.Name, Namespace: m.Secret.Namespace}, Type: corev1.SecretTypeTLS}
		if secret.Data, err = generate(hosts); err != nil {
			return nil, err
		}
		err = m.Client.Create(ctx, &secret)
		if apierrors.IsAlreadyExists(err) {
			return m.secret(ctx, hosts)
		}
		if err != nil {
			return nil, fmt.Errorf("creating secret %s: %w", m.Secret, err)
		}
		m.Log.Info("created the webhook's certificate", "secret", m.Secret, "hosts", hosts)
		return &secret, nil
	case err != nil:
		return nil, fmt.Errorf("reading secret %s: %w", m.Secret, err)
	}
	if problem := Check(secret.Data, hosts, time.Now().Add(renewBefore)); problem != "" {
		data, err := generate(hosts)
		if err != nil {
			return nil, err
		}
		secret.Type, secret.Data = corev1.SecretTypeTLS, data
		if err := m.Client.Update(ctx, &secret); err != nil {
			return nil, fmt.Errorf("renewing secret %s (%s): %w", m.Secret, problem, err)
		}
		m.Log.Info("renewed the webhook's certificate", "secret", m.Secret, "reason", problem, "hosts", hosts)
	}
	return &secret, nil
}

// setCABundle points every webhook of a configuration (validating or mutating) at the CA.
func (m *Manager) setCABundle(ctx context.Context, config client.Object, ca []byte) error {
	patched := config.DeepCopyObject().(client.Object)
	changed := false
	for _, cc := range ClientConfigs(patched) {
		if !bytes.Equal(cc.CABundle, ca) {
			cc.CABundle = ca
			changed = true
		}
	}
	if !changed {
		return nil
	}
	kind := kindOf(config)
	if err := m.Client.Patch(ctx, patched, client.MergeFromWithOptions(config, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("setting the caBundle of %s %s: %w", kind, m.Configuration, err)
	}
	m.Log.Info("set the caBundle of the webhooks", "configuration", m.Configuration, "kind", kind)
	return nil
}

// ClientConfigs are the client configurations of a webhook configuration's webhooks (validating
// or mutating), to change in place.
func ClientConfigs(config client.Object) []*admissionregistrationv1.WebhookClientConfig {
	var ccs []*admissionregistrationv1.WebhookClientConfig
	switch c := config.(type) {
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for i := range c.Webhooks {
			ccs = append(ccs, &c.Webhooks[i].ClientConfig)
		}
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for i := range c.Webhooks {
			ccs = append(ccs, &c.Webhooks[i].ClientConfig)
		}
	}
	return ccs
}

func kindOf(config client.Object) string {
	if _, ok := config.(*admissionregistrationv1.MutatingWebhookConfiguration); ok {
		return "MutatingWebhookConfiguration"
	}
	return "ValidatingWebhookConfiguration"
}

// Hosts are the names the apiserver may call the configurations' webhooks by: each Service's
// short and cluster DNS names, each url's host. Sorted, without duplicates.
func Hosts(configs ...client.Object) []string {
	set := map[string]bool{}
	for _, config := range configs {
		for _, cc := range ClientConfigs(config) {
			switch {
			case cc.Service != nil:
				s := cc.Service
				for _, name := range []string{s.Name, s.Name + "." + s.Namespace, s.Name + "." + s.Namespace + ".svc", s.Name + "." + s.Namespace + ".svc.cluster.local"} {
					set[name] = true
				}
			case cc.URL != nil:
				if u, err := url.Parse(*cc.URL); err == nil && u.Hostname() != "" {
					set[u.Hostname()] = true
				}
			}
		}
	}
	hosts := make([]string, 0, len(set))
	for h := range set {
		hosts = append(hosts, h)
	}
	sort.Strings(hosts)
	return hosts
}

// Check says why a Secret's data is no certificate to serve hosts with until deadline; "" when
// it is one.
func Check(data map[string][]byte, hosts []string, deadline time.Time) string {
	if len(data[CAKey]) == 0 {
		return "no CA"
	}
	if _, err := tls.X509KeyPair(data[corev1.TLSCertKey], data[corev1.TLSPrivateKeyKey]); err != nil {
		return "no valid key pair: " + err.Error()
	}
	certs, err := certutil.ParseCertsPEM(data[corev1.TLSCertKey])
	if err != nil {
		return "unreadable certificate: " + err.Error()
	}
	roots, err := certutil.NewPoolFromBytes(data[CAKey])
	if err != nil {
		return "unreadable CA: " + err.Error()
	}
	leaf := certs[0]
	if leaf.NotAfter.Before(deadline) {
		return fmt.Sprintf("expires at %s", leaf.NotAfter.Format(time.RFC3339))
	}
	for _, host := range hosts {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			return fmt.Sprintf("not valid for %s: %v", host, err)
		}
	}
	return ""
}

// generate makes a CA and a certificate it signs for hosts.
func generate(hosts []string) (map[string][]byte, error) {
	var ips []net.IP
	var dns []string
	for _, h := range hosts[1:] {
		if ip := net.ParseIP(h); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, h)
		}
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKeyWithOptions(certutil.SelfSignedCertKeyOptions{
		Host: hosts[0], AlternateIPs: ips, AlternateDNS: dns, MaxAge: validity,
	})
	if err != nil {
		return nil, fmt.Errorf("generating the webhook's certificate: %w", err)
	}
	// The generator writes the serving certificate, then the CA that signed it.
	certs, err := certutil.ParseCertsPEM(certPEM)
	if err != nil {
		return nil, fmt.Errorf("generating the webhook's certificate: %w", err)
	}
	if len(certs) != 2 {
		return nil, fmt.Errorf("generating the webhook's certificate: want a certificate and its CA, got %d certificates", len(certs))
	}
	ca, err := certutil.EncodeCertificates(certs[1])
	if err != nil {
		return nil, err
	}
	return map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, CAKey: ca}, nil
}
