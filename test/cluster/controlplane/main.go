// Command stateward-controlplane is a multi-call binary holding the real
// Kubernetes control-plane components Stateward's tests run against:
//
//	stateward-controlplane apiserver          [kube-apiserver flags]
//	stateward-controlplane controller-manager [kube-controller-manager flags]
//	stateward-controlplane scheduler          [kube-scheduler flags]
//	stateward-controlplane etcd               [etcd flags]
//	stateward-controlplane version
//
// One binary keeps the shared dependency graph linked once (smaller, faster
// to build than three binaries) while each component still runs as its own
// OS process: the components keep process-global state (feature gates, klog,
// metrics registries) and tests need to kill or restart them one at a time.
package main

import (
	"fmt"
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

// version is stamped at link time (-X main.version=...) from versions.env so
// the harness can tell a stale cached binary from a current one.
var version = "dev"

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	component, args := os.Args[1], os.Args[2:]
	switch component {
	case "apiserver":
		cmd := apiserver.NewAPIServerCommand()
		cmd.SetArgs(args)
		os.Exit(cli.Run(cmd))
	case "controller-manager":
		cmd := controllermanager.NewControllerManagerCommand()
		cmd.SetArgs(args)
		os.Exit(cli.Run(cmd))
	case "scheduler":
		cmd := scheduler.NewSchedulerCommand()
		cmd.SetArgs(args)
		os.Exit(cli.Run(cmd))
	case "etcd":
		// etcdmain reads its flags from os.Args[1:], so present them as if
		// this process had been started as "etcd <flags>".
		etcdmain.Main(append([]string{"etcd"}, args...))
	case "version", "--version", "-version":
		fmt.Println(version)
	default:
		fmt.Fprintf(os.Stderr, "unknown component %q\n", component)
		usage()
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: stateward-controlplane apiserver|controller-manager|scheduler|etcd|version [flags]")
}
