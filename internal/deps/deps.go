// Package deps pins the modules the packages are being built on; removed once every one is imported for real.
package deps
import (
 _ "github.com/urfave/cli/v2"
 _ "golang.org/x/sys/unix"
 _ "github.com/hashicorp/go-multierror"
 _ "github.com/stretchr/testify/require"
 _ "sigs.k8s.io/yaml"
 _ "k8s.io/api/core/v1"
 _ "github.com/creack/pty"
)
