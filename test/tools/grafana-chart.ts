// grafana's own Helm chart for rollout-operator (grafana/helm-charts
// charts/rollout-operator), at a pinned commit, for the test that installs it
// with only the image swapped (issue 34). Fetched as the Go module proxy
// serves any public GitHub repository (a zip verified against the checksum
// database), never from GitHub, so it works where only package registries
// are reachable; copied into the cache keyed by the commit
// (<cache>/peers/grafana-helm-charts-<commit>/rollout-operator). Nothing of
// it is copied into this repository.
import { existsSync } from 'node:fs';
import { cp, mkdtemp, readFile, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { peersDir } from '../../bench/peers.ts';
import { goOutput } from './go.ts';

export const GRAFANA_CHART = {
  module: 'github.com/grafana/helm-charts',
  // main at 2026-08-20 (merge of #4213); charts/rollout-operator there is byte
  // for byte that of 181da6d3, the commit that made it 0.51.1. The proxy
  // serves this pseudo-version (its @latest); 181da6d3's it refuses.
  version: 'v0.0.0-20260820194520-7a0ab968961a',
  commit: '7a0ab968961a',
  chartVersion: '0.51.1',
  appVersion: 'v0.39.0',
} as const;

/** The chart's directory, fetched on first use; throws saying why when no registry serves it. */
export async function grafanaRolloutOperatorChart(log: (line: string) => void): Promise<string> {
  const dir = join(peersDir(), `grafana-helm-charts-${GRAFANA_CHART.commit}`, 'rollout-operator');
  if (!existsSync(join(dir, 'Chart.yaml'))) {
    log(`fetching ${GRAFANA_CHART.module}@${GRAFANA_CHART.version} from the Go module proxy (first use)`);
    const scratch = await mkdtemp(join(tmpdir(), 'grafana-chart-'));
    try {
      const out = await goOutput([
        'mod',
        'download',
        '-json',
        `${GRAFANA_CHART.module}@${GRAFANA_CHART.version}`,
      ]).catch((error: unknown) => {
        throw new Error(
          `grafana's rollout-operator chart is not available: go mod download ${GRAFANA_CHART.module}@${GRAFANA_CHART.version} failed (${error instanceof Error ? error.message : String(error)}); the test cannot run without it`,
        );
      });
      const downloaded = JSON.parse(out) as { Dir?: string; Error?: string };
      if (!downloaded.Dir) throw new Error(`grafana's rollout-operator chart is not available: ${downloaded.Error}`);
      const copy = join(scratch, 'rollout-operator');
      await cp(join(downloaded.Dir, 'charts', 'rollout-operator'), copy, { recursive: true });
      await rm(dir, { recursive: true, force: true });
      await cp(copy, `${dir}.tmp`, { recursive: true });
      await rename(`${dir}.tmp`, dir);
    } finally {
      await rm(scratch, { recursive: true, force: true });
    }
  }
  const chart = await readFile(join(dir, 'Chart.yaml'), 'utf8');
  const version = /^version:\s*(\S+)/m.exec(chart)?.[1];
  const appVersion = /^appVersion:\s*(\S+)/m.exec(chart)?.[1];
  if (version !== GRAFANA_CHART.chartVersion || appVersion !== GRAFANA_CHART.appVersion)
    throw new Error(
      `${dir}: chart ${version} (app ${appVersion}), expected ${GRAFANA_CHART.chartVersion} (app ${GRAFANA_CHART.appVersion})`,
    );
  return dir;
}
