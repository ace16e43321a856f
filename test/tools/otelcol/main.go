// A minimal OpenTelemetry Collector for the tracing tests: the core
// distribution's OTLP receiver (gRPC and HTTP) and debug exporter, nothing
// else. The tests point Stateward's OTLP exporter at the receiver and read the
// spans back from the debug exporter's detailed output, written to a file.
//
// The collector's own cmd/otelcorecol is not published as a module, so this
// is the few lines its builder would generate for these two components.
package main

import (
	"fmt"
	"os"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func factories() (otelcol.Factories, error) {
	receivers, err := otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	exporters, err := otelcol.MakeFactoryMap[exporter.Factory](debugexporter.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	return otelcol.Factories{Receivers: receivers, Exporters: exporters, Telemetry: otelconftelemetry.NewFactory()}, nil
}

func main() {
	settings := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "stateward-otelcol", Description: "OpenTelemetry Collector (OTLP receiver, debug exporter) for Stateward's tests", Version: version},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			// Only files: the test writes the configuration, nothing is expanded.
			ResolverSettings: confmap.ResolverSettings{ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()}, DefaultScheme: "file"},
		},
	}
	if err := otelcol.NewCommand(settings).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// version is stamped by the build (-X main.version=<collector version>).
var version = "dev"
