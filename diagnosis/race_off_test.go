//go:build !race

package diagnosis

// raceEnabled: see race_on_test.go.
const raceEnabled = false
