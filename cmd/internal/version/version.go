// Package version holds Tephra's release version, stamped at build time with
//
//	-ldflags "-X github.com/tephra-dev/tephra/cmd/internal/version.Version=v0.1.0"
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version of Tephra; "dev" in builds that were not stamped.
var Version = "dev"

// KubernetesVersion is the version of k8s.io/kubernetes compiled in.
func KubernetesVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/kubernetes" {
				return dep.Version
			}
		}
	}
	return "unknown"
}

// String describes a binary's version for --version.
func String(binary string) string {
	return fmt.Sprintf("%s %s (kubernetes %s, %s %s/%s)", binary, Version, KubernetesVersion(),
		runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
