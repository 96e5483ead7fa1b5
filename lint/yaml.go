package lint

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// get returns the value of key in mapping n, nil when n is not a mapping
// or has no such key. Aliases are followed, and so are merge keys
// (`<<: *defaults`, Compose's way of sharing settings): a key of n's own
// wins over a merged one, and an earlier merged mapping over a later one
// (eachPair's order).
func get(n *yaml.Node, key string) (v *yaml.Node) {
	eachPair(n, 0, func(k, val *yaml.Node, _ bool) bool {
		if k.Kind == yaml.ScalarNode && k.Value == key {
			v = val
			return false
		}
		return true
	})
	return v
}

// maxMergeDepth bounds how many merge keys deep eachPair looks: yaml.v3
// accepts a mapping that merges itself.
const maxMergeDepth = 32

// eachPair calls fn with the key/value pairs of mapping n (aliases
// followed; a value may be nil) in order, then, merge keys followed
// maxMergeDepth deep, with those of the mappings each merge key names, in
// order (merged true), until fn returns false; it returns false then.
func eachPair(n *yaml.Node, depth int, fn func(k, v *yaml.Node, merged bool) bool) bool {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return true
	}
	var merges []*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := deref(n.Content[i])
		switch {
		case k == nil:
		case k.Kind == yaml.ScalarNode && isMerge(k):
			merges = append(merges, mergeSources(n.Content[i+1])...)
		case !fn(k, deref(n.Content[i+1]), depth > 0):
			return false
		}
	}
	if depth == maxMergeDepth {
		return true
	}
	for _, m := range merges {
		if !eachPair(m, depth+1, fn) {
			return false
		}
	}
	return true
}

// isMerge reports whether mapping key k is YAML's merge key: a plain <<,
// not a quoted one or one tagged !!str.
func isMerge(k *yaml.Node) bool { return k.ShortTag() == "!!merge" }

// mergeSources is the mappings a merge key's value names: one mapping or
// a sequence of them.
func mergeSources(v *yaml.Node) []*yaml.Node {
	v = deref(v)
	switch {
	case v == nil:
		return nil
	case v.Kind == yaml.MappingNode:
		return []*yaml.Node{v}
	case v.Kind == yaml.SequenceNode:
		var out []*yaml.Node
		for _, c := range items(v) {
			if c.Kind == yaml.MappingNode {
				out = append(out, c)
			}
		}
		return out
	}
	return nil
}

// path follows keys from n.
func path(n *yaml.Node, keys ...string) *yaml.Node {
	for _, k := range keys {
		n = get(n, k)
	}
	return n
}

// deref follows alias nodes (bounded: yaml.v3 rejects alias cycles).
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 32; i++ {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.AliasNode {
		return nil
	}
	return n
}

// items returns the elements of a sequence node (nil otherwise).
func items(n *yaml.Node) []*yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.SequenceNode {
		return nil
	}
	out := make([]*yaml.Node, 0, len(n.Content))
	for _, c := range n.Content {
		if c = deref(c); c != nil {
			out = append(out, c)
		}
	}
	return out
}

// pairs returns the key/value pairs of a mapping node in order, then
// those its merge keys bring that it does not have itself (eachPair).
func pairs(n *yaml.Node) [][2]*yaml.Node {
	var out [][2]*yaml.Node
	var seen map[string]bool
	eachPair(n, 0, func(k, v *yaml.Node, merged bool) bool {
		switch {
		case v == nil:
		case !merged:
			out = append(out, [2]*yaml.Node{k, v})
		default:
			if seen == nil {
				seen = map[string]bool{}
				for _, p := range out {
					seen[p[0].Value] = true
				}
			}
			if !seen[k.Value] {
				seen[k.Value] = true
				out = append(out, [2]*yaml.Node{k, v})
			}
		}
		return true
	})
	return out
}

// str returns a scalar's value ("" for anything else).
func str(n *yaml.Node) string {
	n = deref(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// boolean returns a scalar boolean, nil when absent or not a boolean.
func boolean(n *yaml.Node) *bool {
	n = deref(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return nil
	}
	switch strings.ToLower(n.Value) {
	case "true", "yes", "on":
		b := true
		return &b
	case "false", "no", "off":
		b := false
		return &b
	}
	return nil
}

// integer returns a scalar integer, nil when absent or not an integer.
func integer(n *yaml.Node) *int64 {
	n = deref(n)
	if n == nil || n.Kind != yaml.ScalarNode {
		return nil
	}
	v, err := strconv.ParseInt(strings.TrimSpace(n.Value), 0, 64)
	if err != nil {
		return nil
	}
	return &v
}

// strings returns the scalar elements of a sequence (a lone scalar is a
// one-element list, as Compose allows for some fields).
func stringList(n *yaml.Node) []string {
	n = deref(n)
	if n == nil {
		return nil
	}
	if n.Kind == yaml.ScalarNode {
		return []string{n.Value}
	}
	var out []string
	for _, c := range items(n) {
		if c.Kind == yaml.ScalarNode {
			out = append(out, c.Value)
		}
	}
	return out
}

// line is n's line, or def when n is nil.
func line(n *yaml.Node, def int) int {
	if n == nil || n.Line == 0 {
		return def
	}
	return n.Line
}

// Aliases let a few KB stand for billions of nodes (a list of aliases to
// a list of aliases ...), and lint follows aliases wherever it reads. A
// document may expand to at most aliasRatio times its own nodes plus
// aliasSlack: far above what anchors in a Compose file or a manifest
// reuse, and a bound on the work of reading the document.
const (
	aliasRatio = 10
	aliasSlack = 100000
)

// eachOwn calls fn on n and on every node written under it, in the
// file's order, aliases not followed (an alias node has no content), until
// fn returns false.
func eachOwn(n *yaml.Node, fn func(*yaml.Node) bool) {
	stack := []*yaml.Node{n}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n == nil {
			continue
		}
		if !fn(n) {
			return
		}
		for i := len(n.Content) - 1; i >= 0; i-- {
			stack = append(stack, n.Content[i])
		}
	}
}

// ownNodes counts the nodes written in n, aliases not followed.
func ownNodes(n *yaml.Node) int {
	c := 0
	eachOwn(n, func(*yaml.Node) bool { c++; return true })
	return c
}

// expansion counts the nodes of n with every alias followed, up to limit
// (it returns limit+1 past it, and for an alias that contains itself).
// An anchored node (the only kind an alias reaches) is counted once and
// its count reused, so the cost is that of the written document, not of
// its expansion.
func expansion(n *yaml.Node, limit int, memo map[*yaml.Node]int) int {
	if n == nil {
		return 0
	}
	if n.Anchor != "" {
		if c, ok := memo[n]; ok {
			if c < 0 {
				return limit + 1 // a cycle: the node is being counted
			}
			return c
		}
		memo[n] = -1
	}
	c := 1
	if n.Kind == yaml.AliasNode {
		c += expansion(n.Alias, limit, memo)
	}
	for _, ch := range n.Content {
		if c > limit {
			break
		}
		c += expansion(ch, limit, memo)
	}
	c = min(c, limit+1)
	if n.Anchor != "" {
		memo[n] = c
	}
	return c
}

// aliasBomb reports whether document n, of own written nodes
// (ownNodes), expands past its bound, and the bound.
func aliasBomb(n *yaml.Node, own int) (bool, int) {
	limit := aliasRatio*own + aliasSlack
	return expansion(n, limit, map[*yaml.Node]int{}) > limit, limit
}
