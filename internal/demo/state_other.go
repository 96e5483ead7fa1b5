//go:build !linux

package demo

func probeState(string) (State, error) { return State{}, ErrUnsupported }
