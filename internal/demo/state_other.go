//go:build !linux

package demo

func probeState() (State, error) { return State{}, ErrUnsupported }
