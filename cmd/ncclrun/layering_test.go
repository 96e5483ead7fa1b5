package main

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLayering: only cmd/ncclrun wires the launcher to the rest. No
// internal package and not nccllog imports launcher, directly or through
// another package of this module (tests left out).
func TestLayering(t *testing.T) {
	const module = "github.com/ncclrun/ncclrun/"
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	imports := map[string][]string{} // package dir (relative) -> the module's packages it imports
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			if strings.HasPrefix(path, module) {
				imports[rel] = append(imports[rel], strings.TrimPrefix(path, module))
			}
		}
		return nil
	})
	require.NoError(t, err)
	var reaches func(pkg, target string, seen map[string]bool) bool
	reaches = func(pkg, target string, seen map[string]bool) bool {
		if pkg == target {
			return true
		}
		if seen[pkg] {
			return false
		}
		seen[pkg] = true
		for _, im := range imports[pkg] {
			if reaches(im, target, seen) {
				return true
			}
		}
		return false
	}
	require.NotEmpty(t, imports["nccllog"])
	for pkg := range imports {
		if strings.HasPrefix(pkg, "internal/") || pkg == "nccllog" {
			assert.False(t, reaches(pkg, "launcher", map[string]bool{}), "%s imports launcher", pkg)
		}
	}
}
