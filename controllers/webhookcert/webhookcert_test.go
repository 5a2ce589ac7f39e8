package webhookcert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

var secretName = types.NamespacedName{Namespace: "tephra-system", Name: "tephra-controllers-webhook-tls"}

func configuration(clientConfigs ...admissionregistrationv1.WebhookClientConfig) *admissionregistrationv1.ValidatingWebhookConfiguration {
	c := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "tephra-controllers"}}
	for _, cc := range clientConfigs {
		c.Webhooks = append(c.Webhooks, admissionregistrationv1.ValidatingWebhook{Name: "w.tephra.dev", ClientConfig: cc})
	}
	return c
}

func service(ns string) admissionregistrationv1.WebhookClientConfig {
	return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: "tephra-controllers-webhook", Path: ptr.To("/x")}}
}

func newManager(t *testing.T, objs ...client.Object) (*Manager, client.Client) {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	return &Manager{Client: c, Configuration: "tephra-controllers", Secret: secretName, Log: logr.Discard()}, c
}

// The certificate names every host a Service or url of the configuration may be called by.
func TestHostsAreWhatTheApiserverCalls(t *testing.T) {
	url := "https://127.0.0.1:9443/validate"
	got := Hosts(configuration(service("tephra-system"), admissionregistrationv1.WebhookClientConfig{URL: &url}))
	assert.Equal(t, []string{
		"127.0.0.1",
		"tephra-controllers-webhook",
		"tephra-controllers-webhook.tephra-system",
		"tephra-controllers-webhook.tephra-system.svc",
		"tephra-controllers-webhook.tephra-system.svc.cluster.local",
	}, got)
}

// The first replica creates the Secret and points the configuration at its CA; the apiserver
// (here, a TLS client trusting only the caBundle) then accepts the served certificate for the
// Service's name. Another replica serves the same certificate.
func TestEnsureCreatesACertificateTheApiserverTrusts(t *testing.T) {
	ctx := context.Background()
	m, c := newManager(t, configuration(service("tephra-system")))
	require.NoError(t, m.Ensure(ctx))

	var config admissionregistrationv1.ValidatingWebhookConfiguration
	require.NoError(t, c.Get(ctx, types.NamespacedName{Name: "tephra-controllers"}, &config))
	bundle := config.Webhooks[0].ClientConfig.CABundle
	require.NotEmpty(t, bundle, "caBundle")
	served, err := m.GetCertificate(&tls.ClientHelloInfo{})
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(served.Certificate[0])
	require.NoError(t, err)
	roots := x509.NewCertPool()
	require.True(t, roots.AppendCertsFromPEM(bundle))
	_, err = leaf.Verify(x509.VerifyOptions{DNSName: "tephra-controllers-webhook.tephra-system.svc", Roots: roots})
	assert.NoError(t, err, "the apiserver trusts the served certificate")

	other := &Manager{Client: c, Configuration: m.Configuration, Secret: secretName, Log: logr.Discard()}
	require.NoError(t, other.Ensure(ctx))
	second, err := other.GetCertificate(nil)
	require.NoError(t, err)
	assert.Equal(t, served.Certificate, second.Certificate, "replicas share the certificate")
}

// A Secret that is damaged, or names other hosts (the chart moved to another namespace), is
// replaced by a valid one; a valid one is kept as it is.
func TestEnsureRenewsACertificateThatCannotServe(t *testing.T) {
	ctx := context.Background()
	damaged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName.Name, Namespace: secretName.Namespace}, Data: map[string][]byte{"tls.crt": []byte("x")}}
	m, c := newManager(t, configuration(service("elsewhere")), damaged)
	require.NoError(t, m.Ensure(ctx))
	var secret corev1.Secret
	require.NoError(t, c.Get(ctx, secretName, &secret))
	hosts := Hosts(configuration(service("elsewhere")))
	assert.Empty(t, Check(secret.Data, hosts, time.Now()), "the renewed certificate serves the configuration's hosts")
	assert.NotEmpty(t, Check(secret.Data, Hosts(configuration(service("tephra-system"))), time.Now()), "and names no other namespace's Service")
	assert.Equal(t, corev1.SecretTypeTLS, secret.Type)

	version := secret.ResourceVersion
	require.NoError(t, m.Ensure(ctx))
	require.NoError(t, c.Get(ctx, secretName, &secret))
	assert.Equal(t, version, secret.ResourceVersion, "a valid certificate is not rewritten")
}

// A certificate within renewBefore of its end is renewed.
func TestCheckRefusesACertificateNearItsEnd(t *testing.T) {
	hosts := []string{"a.example"}
	data, err := generate(hosts)
	require.NoError(t, err)
	assert.Empty(t, Check(data, hosts, time.Now().Add(renewBefore)))
	assert.Contains(t, Check(data, hosts, time.Now().Add(validity)), "expires at")
	assert.Contains(t, Check(data, []string{"b.example"}, time.Now()), "not valid for b.example")
}

// Without its configuration the manager says which one it misses, and serves nothing.
func TestEnsureNamesAMissingConfiguration(t *testing.T) {
	m, _ := newManager(t)
	err := m.Ensure(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ValidatingWebhookConfiguration tephra-controllers")
	_, err = m.GetCertificate(nil)
	assert.Error(t, err)
}
