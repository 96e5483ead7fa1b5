//go:build !linux

package main

import "errors"

// cmdSplice needs Linux (splice(2)).
func cmdSplice([]string) error { return errors.New("splice: Linux only") }
