package plugins

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"flag"
	"fmt"
	"path"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	batchv1alpha1 "github.com/tephra-dev/tephra/apis/batch/v1alpha1"
)

// Keys of the ssh plugin's Secret, which are also the file names under its mount path.
const (
	SSHPrivateKey     = "id_ed25519"
	SSHPublicKey      = "id_ed25519.pub"
	SSHAuthorizedKeys = "authorized_keys"
	SSHConfig         = "config"
)

// DefaultSSHPath is where the ssh plugin mounts its Secret unless --ssh-key-file-path says
// otherwise.
const DefaultSSHPath = "/root/.ssh"

const sshVolume = "tephra-ssh"

// SSHSecretName is the name of the ssh plugin's Secret of a job.
func SSHSecretName(job string) string { return job + "-ssh" }

// sshPlugin lets the job's pods log in to each other with one key pair per job, generated when
// the job is first reconciled and never rotated.
type sshPlugin struct {
	noDelete
	d   deps
	dir string
}

func newSSH(d deps, args []string) (Plugin, error) {
	var dir *string
	err := parseArgs(SSHPlugin, args, func(fs *flag.FlagSet) {
		dir = fs.String("ssh-key-file-path", DefaultSSHPath, "where the keys are mounted")
	})
	if err != nil {
		return nil, err
	}
	if !path.IsAbs(*dir) {
		return nil, fmt.Errorf("plugin ssh: --ssh-key-file-path=%q is not an absolute path", *dir)
	}
	return &sshPlugin{d: d, dir: path.Clean(*dir)}, nil
}

func (p *sshPlugin) Name() string { return SSHPlugin }

func (p *sshPlugin) OnJobAdd(ctx context.Context, job *batchv1alpha1.Job) error {
	secret := &corev1.Secret{ObjectMeta: objectMeta(job, SSHSecretName(job.Name)), Type: corev1.SecretTypeOpaque}
	return ensure(ctx, p.d, job, secret, p.fillKeys, nil)
}

// fillKeys generates the job's key pair into the Secret, with a client configuration that
// trusts the job's pods without asking.
func (p *sshPlugin) fillKeys(secret *corev1.Secret) error {
	public, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return fmt.Errorf("plugin ssh: generating a key: %w", err)
	}
	block, err := ssh.MarshalPrivateKey(private, "tephra job "+secret.Namespace+"/"+secret.Name)
	if err != nil {
		return fmt.Errorf("plugin ssh: encoding the private key: %w", err)
	}
	sshPublic, err := ssh.NewPublicKey(public)
	if err != nil {
		return fmt.Errorf("plugin ssh: encoding the public key: %w", err)
	}
	authorized := ssh.MarshalAuthorizedKey(sshPublic)
	secret.Data = map[string][]byte{
		SSHPrivateKey:     pem.EncodeToMemory(block),
		SSHPublicKey:      authorized,
		SSHAuthorizedKeys: authorized,
		SSHConfig:         []byte(p.clientConfig()),
	}
	return nil
}

// clientConfig is the ssh client configuration: the job's pods come and go under the same
// names with new host keys, so host keys are neither checked nor remembered.
func (p *sshPlugin) clientConfig() string {
	return "Host *\n" +
		"  StrictHostKeyChecking no\n" +
		"  UserKnownHostsFile /dev/null\n" +
		"  LogLevel ERROR\n" +
		"  IdentityFile " + path.Join(p.dir, SSHPrivateKey) + "\n"
}

func (p *sshPlugin) OnPodCreate(pod *corev1.Pod, job *batchv1alpha1.Job) error {
	addVolume(pod, corev1.Volume{Name: sshVolume, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: SSHSecretName(job.Name), DefaultMode: ptr.To[int32](0o600)},
	}})
	addMount(pod, corev1.VolumeMount{Name: sshVolume, MountPath: p.dir})
	return nil
}
