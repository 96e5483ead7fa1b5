//go:build race

package diagnosis

// raceEnabled: the race detector makes the matcher 10 to 20 times slower,
// so the volume tests scale their line counts down (never their bounds).
const raceEnabled = true
