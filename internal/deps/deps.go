// Package deps pins the modules the packages are being built on; removed once every one is imported for real.
package deps

import (
	_ "github.com/creack/pty"
	_ "github.com/hashicorp/go-multierror"
	_ "github.com/stretchr/testify/require"
	_ "github.com/urfave/cli/v2"
	_ "golang.org/x/sys/unix"
	_ "k8s.io/api/core/v1"
	_ "sigs.k8s.io/yaml"
)
