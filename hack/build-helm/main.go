// Command build-helm builds helm at the version the tests pin (localcluster.HelmVersion) into
// bin/, as the tests build it; `make helm` and `make verify` run it.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/tephra-dev/tephra/internal/localcluster"
)

func main() {
	root, err := localcluster.RepoRoot()
	if err == nil {
		var path string
		path, err = localcluster.BuildHelm(context.Background(), root, os.Stderr)
		if err == nil {
			fmt.Println(path)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "build-helm:", err)
		os.Exit(1)
	}
}
