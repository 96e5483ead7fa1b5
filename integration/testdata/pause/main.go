// Command pause is the CRI suite's pod sandbox image: like Kubernetes'
// pause, it holds the pod's namespaces, reaps orphans and exits 0 on SIGINT
// or SIGTERM. Built static from Go by the suite (there is no registry to
// pull registry.k8s.io/pause from).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range ch {
		if s == syscall.SIGCHLD {
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
