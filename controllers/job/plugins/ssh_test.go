package plugins

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestSSHCreatesAKeyPairOnce(t *testing.T) {
	c, scheme := fakeClient(t)
	p, err := New(c, scheme, "ssh", nil)
	require.NoError(t, err)
	job := newJob(nil, task("master", 1), task("worker", 2))
	ctx := context.Background()
	require.NoError(t, p.OnJobAdd(ctx, job))

	secret := get(t, c, &corev1.Secret{}, "train-ssh")
	assertOwnedByJob(t, secret, job)
	assert.ElementsMatch(t, []string{"id_ed25519", "id_ed25519.pub", "authorized_keys", "config"}, keys(secret.Data))
	signer, err := ssh.ParsePrivateKey(secret.Data["id_ed25519"])
	require.NoError(t, err, "the private key is in OpenSSH's format")
	authorized, _, _, _, err := ssh.ParseAuthorizedKey(secret.Data["authorized_keys"])
	require.NoError(t, err)
	assert.Equal(t, signer.PublicKey().Marshal(), authorized.Marshal(), "the pods accept the job's own key")
	assert.Equal(t, secret.Data["authorized_keys"], secret.Data["id_ed25519.pub"])
	assert.Equal(t, "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n  IdentityFile /root/.ssh/id_ed25519\n",
		string(secret.Data["config"]))

	for range 2 {
		other, err := New(c, scheme, "ssh", nil) // as built by a later reconcile
		require.NoError(t, err)
		require.NoError(t, other.OnJobAdd(ctx, job))
	}
	again := get(t, c, &corev1.Secret{}, "train-ssh")
	assert.Equal(t, secret.ResourceVersion, again.ResourceVersion, "the Secret is not written again")
	assert.Equal(t, secret.Data, again.Data, "the keys are not regenerated")
}

func TestSSHConfigNamesTheKeysPath(t *testing.T) {
	c, scheme := fakeClient(t)
	p, err := New(c, scheme, "ssh", []string{"--ssh-key-file-path=/home/mpiuser/.ssh"})
	require.NoError(t, err)
	require.NoError(t, p.OnJobAdd(context.Background(), newJob(nil, task("worker", 1))))
	assert.Contains(t, string(get(t, c, &corev1.Secret{}, "train-ssh").Data["config"]), "  IdentityFile /home/mpiuser/.ssh/id_ed25519\n")
}

func TestSSHKeysDifferBetweenJobs(t *testing.T) {
	c, scheme := fakeClient(t)
	p, err := New(c, scheme, "ssh", nil)
	require.NoError(t, err)
	first, second := newJob(nil, task("worker", 1)), newJob(nil, task("worker", 1))
	second.Name, second.UID = "eval", "eval-uid"
	require.NoError(t, p.OnJobAdd(context.Background(), first))
	require.NoError(t, p.OnJobAdd(context.Background(), second))
	assert.NotEqual(t, get(t, c, &corev1.Secret{}, "train-ssh").Data["id_ed25519"], get(t, c, &corev1.Secret{}, "eval-ssh").Data["id_ed25519"])
}

func TestSSHMountsTheKeysPrivately(t *testing.T) {
	job := newJob(nil, task("worker", 2))
	for _, tc := range []struct {
		args []string
		path string
	}{{nil, "/root/.ssh"}, {[]string{"--ssh-key-file-path=/home/mpiuser/.ssh/"}, "/home/mpiuser/.ssh"}} {
		pod := mutated(t, mustNew(t, "ssh", tc.args...), job, "worker", 1)
		assert.Equal(t, []corev1.Volume{{Name: "tephra-ssh", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: "train-ssh", DefaultMode: ptr.To[int32](0o600)},
		}}}, pod.Spec.Volumes)
		for _, c := range allContainers(pod) {
			assert.Equal(t, []corev1.VolumeMount{{Name: "tephra-ssh", MountPath: tc.path}}, c.VolumeMounts, c.Name)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
