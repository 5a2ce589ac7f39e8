package localcluster

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/tephra-dev/tephra/controllers/webhookcert"
)

// Webhook configurations call a Service, which the apiserver resolves through cluster DNS; here
// the controllers are a process on 127.0.0.1, so each webhook's Service is replaced by the url of
// that process, after checking that the Service would reach it in a cluster: it is in the
// manifests, selects the controllers' pods, and its port leads to the container port that
// --webhook-bind-address listens on. So a webhook whose Service, port or path is wrong fails the
// tests as it would fail in a cluster. (With several replicas, the first one is called.)

// localWebhooks rewrites a webhook configuration of the manifests to call the local controllers
// process; other objects are returned as they are.
func (c *Cluster) localWebhooks(obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var config client.Object
	switch obj.GetKind() {
	case "ValidatingWebhookConfiguration":
		config = &admissionregistrationv1.ValidatingWebhookConfiguration{}
	case "MutatingWebhookConfiguration":
		config = &admissionregistrationv1.MutatingWebhookConfiguration{}
	default:
		return obj, nil
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, config, true); err != nil {
		return nil, fmt.Errorf("%s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	for _, cc := range webhookcert.ClientConfigs(config) {
		if cc.Service == nil {
			continue
		}
		if err := c.installation.checkWebhookService(cc.Service); err != nil {
			return nil, fmt.Errorf("a webhook of %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
		port, err := c.port(ReplicaName(Controllers, 0) + "/webhook")
		if err != nil {
			return nil, err
		}
		url := fmt.Sprintf("https://127.0.0.1:%d%s", port, ptr.Deref(cc.Service.Path, "/"))
		cc.Service, cc.URL = nil, &url
	}
	out, err := runtime.DefaultUnstructuredConverter.ToUnstructured(config)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: out}, nil
}

// checkWebhookService checks that a webhook's Service reaches the controllers' webhook server.
func (in *installation) checkWebhookService(ref *admissionregistrationv1.ServiceReference) error {
	obj := in.object("Service", ref.Namespace, ref.Name)
	if obj == nil {
		return fmt.Errorf("the manifests hold no Service %s/%s", ref.Namespace, ref.Name)
	}
	var svc corev1.Service
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &svc); err != nil {
		return fmt.Errorf("service %s: %w", ref.Name, err)
	}
	d, container, err := in.deploymentOf(Controllers)
	if err != nil {
		return err
	}
	if d.Namespace != svc.Namespace || len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		return fmt.Errorf("service %s/%s does not select the pods of Deployment %s/%s", svc.Namespace, svc.Name, d.Namespace, d.Name)
	}
	port := ptr.Deref(ref.Port, 443)
	var target *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if svc.Spec.Ports[i].Port == port {
			target = &svc.Spec.Ports[i]
		}
	}
	if target == nil {
		return fmt.Errorf("service %s has no port %d", svc.Name, port)
	}
	containerPort := target.TargetPort.IntVal
	if target.TargetPort.StrVal != "" {
		containerPort = 0
		for _, p := range container.Ports {
			if p.Name == target.TargetPort.StrVal {
				containerPort = p.ContainerPort
			}
		}
		if containerPort == 0 {
			return fmt.Errorf("service %s's port %d targets %q, which no port of container %s is named", svc.Name, port, target.TargetPort.StrVal, container.Name)
		}
	}
	listens := 9443 // tephra-controllers' default
	for _, arg := range append(container.Command, container.Args...) {
		if address, ok := strings.CutPrefix(arg, "--webhook-bind-address="); ok {
			_, p, err := net.SplitHostPort(address)
			if err != nil {
				return fmt.Errorf("container %s: %s: %w", container.Name, arg, err)
			}
			if listens, err = strconv.Atoi(p); err != nil {
				return fmt.Errorf("container %s: %s: %w", container.Name, arg, err)
			}
		}
	}
	if int(containerPort) != listens {
		return fmt.Errorf("service %s's port %d leads to container port %d, but tephra-controllers listens for webhooks on %d", svc.Name, port, containerPort, listens)
	}
	return nil
}
