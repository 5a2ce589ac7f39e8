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
	"math/big"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// webhookProxy stands in for the Service network between the apiserver and a peer's webhook
// server (see the top of peers.go).
type webhookProxy struct {
	c        *Cluster
	peer     *peer
	server   *http.Server
	upstream *url.URL

	mu        sync.Mutex
	caPEM     []byte
	cert      *tls.Certificate
	transport *http.Transport
}

func (c *Cluster) startWebhookProxy(p *peer) (*webhookProxy, error) {
	listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", c.Port(p.name+"/proxy")))
	if err != nil {
		return nil, fmt.Errorf("%s webhook proxy: %w", p.name, err)
	}
	w := &webhookProxy{
		c:        c,
		peer:     p,
		upstream: &url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", c.Port(p.name+"/webhook"))},
	}
	w.server = &http.Server{
		Handler:           w,
		TLSConfig:         &tls.Config{GetCertificate: w.certificate, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = w.server.ServeTLS(listener, "", "") }()
	return w, nil
}

func (w *webhookProxy) close() {
	if w != nil {
		_ = w.server.Close()
	}
}

// certificate presents a certificate for 127.0.0.1 signed by the CA in the peer's Secret,
// issued again when the peer's CA changes.
func (w *webhookProxy) certificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	ctx, cancel := context.WithTimeout(hello.Context(), 5*time.Second)
	defer cancel()
	p := w.peer
	secret, err := w.c.Client.CoreV1().Secrets(p.namespace).Get(ctx, p.certSecret, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("%s webhook proxy: its certificate: %w", p.name, err)
	}
	caPEM, caKeyPEM := secret.Data["ca.crt"], secret.Data["ca.key"]
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cert != nil && bytes.Equal(caPEM, w.caPEM) {
		return w.cert, nil
	}
	cert, err := issueLocalServing(caPEM, caKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s webhook proxy: %w", p.name, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%s webhook proxy: its Secret holds no CA certificate", p.name)
	}
	if w.transport != nil {
		w.transport.CloseIdleConnections()
	}
	w.caPEM, w.cert = caPEM, cert
	w.transport = &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs:    pool,
		ServerName: p.webhookService + "." + p.namespace + ".svc",
		MinVersion: tls.VersionTLS12,
	}}
	return cert, nil
}

func (w *webhookProxy) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	w.mu.Lock()
	transport := w.transport
	w.mu.Unlock()
	if transport == nil {
		http.Error(rw, w.peer.name+" webhook proxy: no certificate from it yet", http.StatusServiceUnavailable)
		return
	}
	proxy := &httputil.ReverseProxy{
		Rewrite:   func(r *httputil.ProxyRequest) { r.SetURL(w.upstream) },
		Transport: transport,
	}
	proxy.ServeHTTP(rw, r)
}

// issueLocalServing signs a serving certificate for 127.0.0.1 with a CA given in PEM.
func issueLocalServing(caPEM, caKeyPEM []byte) (*tls.Certificate, error) {
	caBlock, _ := pem.Decode(caPEM)
	keyBlock, _ := pem.Decode(caKeyPEM)
	if caBlock == nil || keyBlock == nil {
		return nil, errors.New("no CA certificate and key in the Secret")
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
		Subject:      pkix.Name{CommonName: "webhook-proxy"},
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
