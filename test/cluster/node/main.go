// Command stateward-node is a multi-call binary holding the components of
// the local cluster's real node, built from the same k8s.io/kubernetes
// module and version as the control plane (../controlplane):
//
//	stateward-node kubelet    [kubelet flags]
//	stateward-node kube-proxy [kube-proxy flags]
//	stateward-node version
//
// Like the control plane's, one binary links the shared dependency graph
// once while each component still runs as its own OS process.
package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// version is stamped at link time (-X main.version=...) with the build's
// cache key; the Kubernetes version the components report is stamped into
// k8s.io/component-base/version the same way.
var version = "dev"

func main() {
	if len(os.Args) < 2 {
		usage()
		os.Exit(2)
	}
	component, args := os.Args[1], os.Args[2:]
	switch component {
	case "kubelet":
		cmd := kubelet.NewKubeletCommand(context.Background())
		cmd.SetArgs(args)
		os.Exit(cli.Run(cmd))
	case "kube-proxy":
		cmd := proxy.NewProxyCommand()
		cmd.SetArgs(args)
		os.Exit(cli.Run(cmd))
	case "version", "--version", "-version":
		fmt.Println(version)
	default:
		fmt.Fprintf(os.Stderr, "unknown component %q\n", component)
		usage()
		os.Exit(2)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: stateward-node kubelet|kube-proxy|version [flags]")
}
