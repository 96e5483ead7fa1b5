//go:build !linux

package rlimit

import "testing"

func selfMayRaiseHard(*testing.T) (bool, bool) { return false, false }
