package localcluster

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
)

// The identities that components of a local cluster run as. Tephra's components run as their
// ServiceAccounts, with tokens from the TokenRequest API as a kubelet would mount them; only the
// test driver (Cluster.Client), kube-controller-manager and kwok use the admin certificate.

// APIServerURL is the address of the cluster's apiserver.
func (c *Cluster) APIServerURL() string {
	return fmt.Sprintf("https://127.0.0.1:%d", c.Port(APIServer))
}

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as a ServiceAccount, with a
// token from the TokenRequest API (valid for two days), and returns its path.
func (c *Cluster) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, error) {
	request, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](48 * 3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for service account %s/%s: %w", namespace, name, err)
	}
	return c.writeKubeconfig("sa-"+namespace+"-"+name, &clientcmdapi.AuthInfo{Token: request.Status.Token})
}

// ServiceAccountToken creates a ServiceAccount (if missing) bound to a ClusterRole and returns a
// token for it, e.g. to read metrics as Prometheus would with the shipped tephra-metrics-reader.
func (c *Cluster) ServiceAccountToken(ctx context.Context, namespace, name, clusterRole string) (string, error) {
	_, err := c.Client.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	if clusterRole != "" {
		_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: namespace + ":" + name + ":" + clusterRole},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: clusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
	}
	request, err := c.Client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return request.Status.Token, nil
}

// UserKubeconfig writes a kubeconfig with a client certificate for a user (and groups), signed by
// the cluster's CA as kubeadm signs its components' certificates, and returns its path (mode
// 0600). E.g. "system:kube-scheduler" for kubeadm's scheduler.conf.
func (c *Cluster) UserKubeconfig(user string, groups ...string) (string, error) {
	ca, caKey, err := c.pki.loadCA()
	if err != nil {
		return "", err
	}
	now := time.Now().Add(-time.Hour)
	serial, err := randomSerial()
	if err != nil {
		return "", err
	}
	template := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: user, Organization: groups},
		NotBefore:    now,
		NotAfter:     now.Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	base := "user-" + strings.NewReplacer(":", "-", "/", "-").Replace(user)
	certPath := filepath.Join(c.opts.Dir, "pki", base+".crt")
	keyPath := filepath.Join(c.opts.Dir, "pki", base+".key")
	if err := issue(template, ca, caKey, certPath, keyPath); err != nil {
		return "", err
	}
	certData, err := os.ReadFile(certPath)
	if err != nil {
		return "", err
	}
	keyData, err := os.ReadFile(keyPath)
	if err != nil {
		return "", err
	}
	return c.writeKubeconfig(base, &clientcmdapi.AuthInfo{ClientCertificateData: certData, ClientKeyData: keyData})
}

// writeKubeconfig writes a kubeconfig for the cluster with one user, mode 0600.
func (c *Cluster) writeKubeconfig(name string, user *clientcmdapi.AuthInfo) (string, error) {
	caData, err := os.ReadFile(c.pki.CACert)
	if err != nil {
		return "", err
	}
	config := clientcmdapi.NewConfig()
	config.Clusters["local"] = &clientcmdapi.Cluster{Server: c.APIServerURL(), CertificateAuthorityData: caData}
	config.AuthInfos[name] = user
	config.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	config.CurrentContext = "local"
	dir := filepath.Join(c.opts.Dir, "kubeconfigs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	path := filepath.Join(dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*config, path); err != nil {
		return "", err
	}
	return path, os.Chmod(path, 0o600)
}

// loadCA reads the cluster's CA certificate and key.
func (p *pki) loadCA() (*x509.Certificate, *ecdsa.PrivateKey, error) {
	certPEM, err := os.ReadFile(p.CACert)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err := os.ReadFile(p.CAKey)
	if err != nil {
		return nil, nil, err
	}
	certBlock, _ := pem.Decode(certPEM)
	keyBlock, _ := pem.Decode(keyPEM)
	if certBlock == nil || keyBlock == nil {
		return nil, nil, fmt.Errorf("cannot decode the CA in %s", filepath.Dir(p.CACert))
	}
	cert, err := x509.ParseCertificate(certBlock.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(keyBlock.Bytes)
	if err != nil {
		return nil, nil, err
	}
	return cert, key, nil
}

func randomSerial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
}
