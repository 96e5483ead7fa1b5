package lint

// MaxNodes bounds the nodes of one document. yaml.v3 builds a document's
// whole node tree before lint sees any of it, at about 250 bytes a node,
// and a dense input makes a node of every two bytes (a 3 MB JSON array of
// `{}` is a million nodes, 250 MB): the nodes are counted from the text
// first, and a document past the bound is refused unparsed. A single
// Kubernetes object fits in etcd's 1.5 MiB, well below; a List from
// `kubectl get -o yaml` of a few hundred pods may not, and `jq -c
// '.items[]'` turns it into a stream of objects, each a document.
const MaxNodes = 250000

// docNodes is one document of an input as countNodes finds it.
type docNodes struct {
	off   int // where its text starts (its `---` line, or the input's start)
	line  int // the line of its first token, 1-based
	nodes int // at least about the nodes the parser builds for it
}

// overNodes returns the first document of data with more than MaxNodes
// nodes, ok false when there is none.
func overNodes(data []byte) (d docNodes, ok bool) {
	countNodes(data, func(doc docNodes) bool {
		if doc.nodes > MaxNodes {
			d, ok = doc, true
			return false
		}
		return true
	})
	return d, ok
}

// countNodes calls fn with each document of data (YAML's `---` and `...`
// at the start of a line separate them) and an estimate of the nodes the
// parser will build for it, until fn returns false. It reads the text as
// YAML's scanner does, only as far as counting needs: the indicators that
// start nodes are counted outside quoted scalars, block scalars (`|`,
// `>`) and comments, each weighted by the nodes it may start (an opening
// bracket 2, a flow mapping's `,` 2, a sequence's 1, a mapping's `:` 2, a
// block sequence's `-` 1, an explicit key's `?` 2). For the dense inputs
// that matter the estimate is at least the parser's count; for a manifest
// it is at most twice that. It allocates nothing.
func countNodes(data []byte, fn func(docNodes) bool) {
	const maxStack = 64
	var (
		doc       = docNodes{nodes: 1}
		started   bool // doc has a token
		lineNo    = 1
		flow      [maxStack]byte // the open flow collections ('[' or '{'), innermost last
		depth     int
		quote     byte // the open quoted scalar's quote, 0 outside one
		block     bool // in a block scalar's content
		blockMin  int  // its content is indented more than this
		blockInd  int  // and at least this, its first line's (-1 before it)
		nodeStart bool // a node may start here
		parent    int  // the column a block scalar here would be indented past
		tokenCol  int  // the column of the current token (a key, for `:`)
		afterQ    bool // just after a quoted scalar or a closed flow collection
	)
	inMap := func() bool { return depth > 0 && (depth > maxStack || flow[depth-1] == '{') }
	space := func(line []byte, i int) bool { return i >= len(line) || line[i] == ' ' || line[i] == '\t' }
	pos := 0
	if len(data) >= 3 && string(data[:3]) == "\ufeff" {
		pos = 3
	}
	for ; pos < len(data); lineNo++ {
		start, end := pos, pos
		for end < len(data) && data[end] != '\n' && data[end] != '\r' {
			end++
		}
		switch {
		case end+1 < len(data) && data[end] == '\r' && data[end+1] == '\n':
			pos = end + 2
		case end < len(data):
			pos = end + 1
		default:
			pos = end
		}
		line := data[start:end]
		i, marker := 0, false

		// A document marker at the start of a line ends the document
		// whatever came before it, as YAML's scanner takes it.
		if len(line) >= 3 && (string(line[:3]) == "---" || string(line[:3]) == "...") && space(line, 3) {
			if started && !fn(doc) {
				return
			}
			doc, started = docNodes{off: start, line: lineNo, nodes: 1}, false
			depth, quote, block, afterQ = 0, 0, false, false
			if line[0] == '.' {
				doc.off = pos
				continue
			}
			// The rest of the line is the root node's start.
			i, marker, nodeStart, parent = 3, true, true, -1
		} else if block {
			// As YAML's scanner reads a block scalar: its first line that
			// is not blank sets its indentation, and a line indented less
			// ends it.
			for i < len(line) && line[i] == ' ' {
				i++
			}
			switch {
			case i == len(line):
				continue
			case blockInd < 0 && i > blockMin:
				blockInd = i
				continue
			case blockInd >= 0 && i >= blockInd:
				continue
			}
			block = false
		}
		if !marker && depth == 0 && quote == 0 {
			i = 0
			if !started && len(line) > 0 && line[0] == '%' {
				continue // a directive
			}
			for i < len(line) && line[i] == ' ' {
				i++
			}
			nodeStart, parent, tokenCol = true, i-1, i
		}
		for ; i < len(line); i++ {
			ch := line[i]
			if quote != 0 {
				switch {
				case quote == '"' && ch == '\\':
					i++
				case ch == quote && quote == '\'' && i+1 < len(line) && line[i+1] == '\'':
					i++
				case ch == quote:
					quote, afterQ = 0, true
				}
				continue
			}
			if ch == ' ' || ch == '\t' {
				continue
			}
			if ch == '#' && (i == 0 || line[i-1] == ' ' || line[i-1] == '\t') {
				break
			}
			if !started {
				started, doc.line = true, lineNo
			}
			if depth > 0 {
				wasAfterQ := afterQ
				afterQ = false
				switch ch {
				case '[', '{':
					doc.nodes += 2
					if depth < maxStack {
						flow[depth] = ch
					}
					depth++
					nodeStart = true
				case ']', '}':
					depth--
					nodeStart, afterQ = false, true
				case ',':
					doc.nodes++
					if inMap() {
						doc.nodes++
					}
					nodeStart = true
				case ':':
					if !wasAfterQ && !space(line, i+1) && line[i+1] != ',' && line[i+1] != ']' && line[i+1] != '}' {
						nodeStart = false // part of a plain scalar (a URL)
						break
					}
					doc.nodes++
					if !inMap() {
						doc.nodes++
					}
					nodeStart = true
				case '"', '\'':
					if nodeStart {
						quote = ch
					}
					nodeStart = false
				default:
					nodeStart = false
				}
				continue
			}
			// Block context.
			if nodeStart {
				switch {
				case (ch == '-' || ch == '?') && space(line, i+1):
					doc.nodes++
					if ch == '?' {
						doc.nodes++
					}
					parent = i
					continue
				case ch == '[' || ch == '{':
					doc.nodes += 2
					flow[0], depth, nodeStart = ch, 1, true
					continue
				case ch == '"' || ch == '\'':
					quote, tokenCol, nodeStart = ch, i, false
					continue
				case ch == '|' || ch == '>':
					if ok, inc := blockHeader(line[i+1:]); ok {
						block, blockMin, blockInd = true, parent, -1
						if inc > 0 {
							// An indentation indicator: the content is
							// indented the parent's indentation plus
							// inc, as libyaml's scanner takes it.
							blockInd = inc + max(parent, 0)
						}
						i = len(line)
						continue
					}
				case ch == '&' || ch == '!':
					for i+1 < len(line) && !space(line, i+1) {
						i++
					}
					continue
				}
				tokenCol, nodeStart = i, false
			}
			if ch == ':' && (space(line, i+1) || afterQ) {
				doc.nodes += 2
				nodeStart, parent = true, tokenCol
			}
			afterQ = false
		}
	}
	if started {
		fn(doc)
	}
}

// blockHeader reports whether rest, what follows a `|` or `>`, is a block
// scalar's header: indentation and chomping indicators, then nothing but
// a comment; inc is the indentation indicator (0 for none).
func blockHeader(rest []byte) (ok bool, inc int) {
	i := 0
	for i < len(rest) && (rest[i] == '+' || rest[i] == '-' || (rest[i] >= '1' && rest[i] <= '9')) {
		if rest[i] >= '1' && rest[i] <= '9' {
			inc = int(rest[i] - '0')
		}
		i++
	}
	if i < len(rest) && rest[i] != ' ' && rest[i] != '\t' {
		return false, 0
	}
	for i < len(rest) && (rest[i] == ' ' || rest[i] == '\t') {
		i++
	}
	return i == len(rest) || rest[i] == '#', inc
}
