package localcluster

import appsv1 "k8s.io/api/apps/v1"

// ManifestDeployment returns a copy of the rendered Deployment that runs a component (Scheduler
// or Controllers), as the manifests ship it: the cluster runs it as processes, and a test may
// hand it to the cluster as it is, for kwok to play its pods.
func (c *Cluster) ManifestDeployment(component string) (*appsv1.Deployment, error) {
	d, _, err := c.installation.deploymentOf(component)
	if err != nil {
		return nil, err
	}
	return d.DeepCopy(), nil
}
