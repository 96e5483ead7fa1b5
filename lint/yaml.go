package lint

import (
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// get returns the value of key in mapping n, nil when n is not a mapping
// or has no such key. Aliases are followed.
func get(n *yaml.Node, key string) *yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := deref(n.Content[i]); k != nil && k.Kind == yaml.ScalarNode && k.Value == key {
			return deref(n.Content[i+1])
		}
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

// pairs returns the key/value pairs of a mapping node in order.
func pairs(n *yaml.Node) [][2]*yaml.Node {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	var out [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k != nil && v != nil {
			out = append(out, [2]*yaml.Node{k, v})
		}
	}
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
