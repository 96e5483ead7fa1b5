//go:build !linux

package main

// raiseIPCLock does nothing where there are no Linux capabilities.
func raiseIPCLock() {}
