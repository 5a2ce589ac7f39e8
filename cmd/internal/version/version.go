// Package version holds Tephra's release version, stamped at build time with
//
//	-ldflags "-X github.com/tephra-dev/tephra/cmd/internal/version.Version=v0.1.0"
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Version of Tephra; "dev" in builds that were not stamped.
var Version = "dev"

// KubernetesVersion is the version of Kubernetes compiled in: k8s.io/kubernetes in the scheduler,
// the matching client-go (v0.X.Y for Kubernetes v1.X.Y) in the controllers.
func KubernetesVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	clientGo := ""
	for _, dep := range info.Deps {
		if dep.Replace != nil {
			dep = dep.Replace
		}
		switch dep.Path {
		case "k8s.io/kubernetes":
			return dep.Version
		case "k8s.io/client-go":
			clientGo = strings.Replace(dep.Version, "v0.", "v1.", 1)
		}
	}
	if clientGo == "" {
		return "unknown"
	}
	return clientGo
}

// String describes a binary's version for --version.
func String(binary string) string {
	return fmt.Sprintf("%s %s (kubernetes %s, %s %s/%s)", binary, Version, KubernetesVersion(),
		runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
