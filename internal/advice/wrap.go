package advice

import "strings"

// PlatformLines splits one alternative of a fix written for every
// platform (AllPlatforms: "Docker: ...; Kubernetes: ...; Slurm, hosts:
// ...") so that each platform's text starts a line: a line starts at a
// platform's label that follows "; " or ". " (the "; " ending the line
// before it keeps its ";"). A text that names no platform is one line.
func PlatformLines(alt string) []string {
	var lines []string
	start := 0
	for i := 0; i+2 < len(alt); i++ {
		if (alt[i] != ';' && alt[i] != '.') || alt[i+1] != ' ' || !startsWithLabel(alt[i+2:]) {
			continue
		}
		end := i + 1 // keep the ';' or '.'
		if line := strings.TrimSpace(alt[start:end]); line != "" && line != ";" {
			lines = append(lines, line)
		}
		start = i + 2
	}
	return append(lines, strings.TrimSpace(alt[start:]))
}

// startsWithLabel reports whether s starts with AllPlatforms' label of a
// platform, or of several that share a text ("Slurm, hosts: ").
func startsWithLabel(s string) bool {
	for {
		found := false
		for _, p := range Platforms {
			if l := platformLabel(p); strings.HasPrefix(s, l) {
				s, found = s[len(l):], true
				break
			}
		}
		switch {
		case !found:
			return false
		case strings.HasPrefix(s, ": "):
			return true
		case strings.HasPrefix(s, ", "):
			s = s[2:]
		default:
			return false
		}
	}
}

// Wrap breaks text into lines of at most width bytes at spaces; a longer
// word stays whole on a line of its own.
func Wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(text) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) <= width:
			line += " " + word
		default:
			lines = append(lines, line)
			line = word
		}
	}
	return append(lines, line)
}
