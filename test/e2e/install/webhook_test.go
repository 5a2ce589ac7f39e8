package install

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tephra-dev/tephra/controllers/webhookcert"
	"github.com/tephra-dev/tephra/internal/localcluster"
	"github.com/tephra-dev/tephra/test/e2e/framework"
)

// webhookCertificateIsRenewed damages the webhooks' certificate Secret and restarts the
// controllers, as a new rollout would: they renew the Secret in place (its Role's update) and
// keep the configuration's caBundle on the new CA (get and patch of the configuration).
func webhookCertificateIsRenewed(t *testing.T, env *framework.Env) {
	t.Helper()
	ctx := framework.Context(t, 2*time.Minute)
	const namespace, name = "tephra-system", "tephra-controllers-webhook-tls"
	secret, err := env.Kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err, "the controllers created the webhooks' certificate Secret")
	secret.Data = map[string][]byte{"tls.crt": []byte("damaged"), "tls.key": []byte("damaged")}
	_, err = env.Kube.CoreV1().Secrets(namespace).Update(ctx, secret, metav1.UpdateOptions{})
	require.NoError(t, err)
	for _, replica := range env.Cluster.ReplicaNames(localcluster.Controllers) {
		env.Cluster.StopComponent(replica)
		require.NoError(t, env.Cluster.StartComponent(context.Background(), replica))
	}
	framework.Eventually(t, time.Minute, "a valid certificate Secret, whose CA the webhooks trust", func() (bool, string) {
		secret, err := env.Kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		config, err := env.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "tephra-controllers", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if problem := webhookcert.Check(secret.Data, webhookcert.Hosts(config), time.Now()); problem != "" {
			return false, "secret: " + problem
		}
		for _, w := range config.Webhooks {
			if !bytes.Equal(w.ClientConfig.CABundle, secret.Data[webhookcert.CAKey]) {
				return false, fmt.Sprintf("webhook %s trusts another CA", w.Name)
			}
		}
		return true, ""
	})
}
