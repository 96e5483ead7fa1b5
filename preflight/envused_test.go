package preflight

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// envMaps are the names the readers give the environment map.
var envMaps = map[string]bool{"env": true, "merged": true, "e": true}

// TestEnvUsedListsEveryVariableRead: every variable name preflight's
// readers look up (env["NAME"], or NAME in a list ranged over and looked
// up) is one EnvUsed accepts, so a snapshot records it. It reads the
// package's source: a reader added with a new variable and no EnvUsed entry
// fails here, not in a user's snapshot.
func TestEnvUsedListsEveryVariableRead(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	found := map[string]string{}
	var parsed []*ast.File
	lists := map[string]*ast.CompositeLit{} // package-level []string{...} vars
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		parsed = append(parsed, f)
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.VAR {
				for _, sp := range g.Specs {
					vs := sp.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if cl, ok := vs.Values[i].(*ast.CompositeLit); ok {
								lists[n.Name] = cl
							}
						}
					}
				}
			}
		}
	}
	for _, f := range parsed {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.IndexExpr:
				if id, ok := n.X.(*ast.Ident); ok && envMaps[id.Name] {
					if lit, ok := n.Index.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						found[v] = fset.Position(lit.Pos()).String()
					}
				}
			case *ast.RangeStmt:
				cl, ok := n.X.(*ast.CompositeLit)
				if id, isID := n.X.(*ast.Ident); isID {
					cl, ok = lists[id.Name]
				}
				val, ok2 := n.Value.(*ast.Ident)
				if !ok || !ok2 || !looksUp(n.Body, val.Name) {
					return true
				}
				for _, el := range cl.Elts {
					if lit, ok := el.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						v, _ := strconv.Unquote(lit.Value)
						found[v] = fset.Position(lit.Pos()).String()
					}
				}
			}
			return true
		})
	}
	require.Contains(t, found, "SLURM_JOB_ID", "the scan finds the lookups")
	require.Contains(t, found, "NCCL_IB_HCA", "the scan finds the lookups")
	for v, where := range found {
		assert.True(t, EnvUsed(v), "%s reads %s, which EnvUsed (record.go) leaves out of snapshots", where, v)
	}
	// And the other way: a snapshot records no variable nothing reads.
	for _, v := range envRecorded {
		assert.Contains(t, found, v, "envRecorded lists %s, which no reader looks up", v)
	}
}

// looksUp reports whether body indexes an environment map with variable k.
func looksUp(body ast.Node, k string) bool {
	hit := false
	ast.Inspect(body, func(n ast.Node) bool {
		if ix, ok := n.(*ast.IndexExpr); ok {
			if id, ok := ix.X.(*ast.Ident); ok && envMaps[id.Name] {
				if kid, ok := ix.Index.(*ast.Ident); ok && kid.Name == k {
					hit = true
				}
			}
		}
		return !hit
	})
	return hit
}
