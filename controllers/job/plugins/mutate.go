package plugins

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// eachContainer calls f on every container and init container of the pod.
func eachContainer(pod *corev1.Pod, f func(c *corev1.Container)) {
	for i := range pod.Spec.InitContainers {
		f(&pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		f(&pod.Spec.Containers[i])
	}
}

// addEnv adds the variables to every container and init container, except those a container
// already sets.
func addEnv(pod *corev1.Pod, vars ...corev1.EnvVar) {
	eachContainer(pod, func(c *corev1.Container) {
		for _, v := range vars {
			if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == v.Name }) {
				c.Env = append(c.Env, v)
			}
		}
	})
}

// addVolume adds the volume unless the pod has one of its name.
func addVolume(pod *corev1.Pod, volume corev1.Volume) {
	if !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == volume.Name }) {
		pod.Spec.Volumes = append(pod.Spec.Volumes, volume)
	}
}

// addMount mounts a volume in every container and init container, except those that already
// mount something at its path.
func addMount(pod *corev1.Pod, mount corev1.VolumeMount) {
	eachContainer(pod, func(c *corev1.Container) {
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == mount.MountPath }) {
			c.VolumeMounts = append(c.VolumeMounts, mount)
		}
	})
}

// addPort declares a port on the pod's first container, unless a container declares that port
// number or that port name already.
func addPort(pod *corev1.Pod, port corev1.ContainerPort) {
	if len(pod.Spec.Containers) == 0 {
		return
	}
	for _, c := range pod.Spec.Containers {
		if slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
			return p.ContainerPort == port.ContainerPort || (port.Name != "" && p.Name == port.Name)
		}) {
			return
		}
	}
	first := &pod.Spec.Containers[0]
	first.Ports = append(first.Ports, port)
}

func env(name, value string) corev1.EnvVar { return corev1.EnvVar{Name: name, Value: value} }
