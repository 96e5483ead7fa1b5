//go:build race

package zstd

// raceEnabled stands for Go's internal/race.Enabled in the tests.
const raceEnabled = true
