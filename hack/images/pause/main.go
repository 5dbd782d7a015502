// pause: the sandbox process of every Pod on the local real node (make cluster NODE=real).
//
// It holds the Pod's namespaces, reaps the children that end up under it (PID 1 of a shared PID
// namespace) and exits 0 on SIGTERM or SIGINT. Built static (CGO_ENABLED=0) and put alone into
// an image by hack/node-images.sh, because no registry with registry.k8s.io/pause is reachable.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for { // reap every child that has exited
			var status syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
