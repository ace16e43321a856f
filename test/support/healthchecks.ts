// The RolloutHealthCheck the health-gate tests, the soak and the benchmark
// share: the rolled pods' worst error ratio over a few seconds must not
// exceed the not-yet-rolled pods' by more than 0.05, evaluated every second.
// It is rollout-operator's shape plus Stateward's evaluation interval (30 s
// by default, too slow for a test); each caller overrides what it studies.
import type { RolloutHealthCheck } from '../../src/rollout/healthcheck/resource.ts';

/** The per-pod series the test exporter publishes (labels namespace, pod). */
export const ERROR_RATIO_METRIC = 'test_error_ratio';
/** How far above the baseline the current ratio may be and still pass. */
export const ERROR_RATIO_SLACK = 0.05;

export interface ErrorRatioOptions {
  /** The series (default ERROR_RATIO_METRIC). */
  metric?: string;
  /** default ERROR_RATIO_SLACK. */
  slack?: number;
  /** `… or vector(0)`: a window without samples reads as a ratio of 0, not as no data. */
  zeroWhenAbsent?: boolean;
  /** Fields over the spec's (e.g. bakeTime, evaluationInterval, headers). */
  spec?: Record<string, unknown>;
  /** Fields over the check's (e.g. currentRange, onFailure). */
  check?: Record<string, unknown>;
}

export function errorRatioCheck(
  name: string,
  namespace: string,
  prometheusURL: string,
  options: ErrorRatioOptions = {},
): RolloutHealthCheck {
  const metric = options.metric ?? ERROR_RATIO_METRIC;
  const query = `max(max_over_time(${metric}{\${targetMatchers}}[\${range}]))${options.zeroWhenAbsent ? ' or vector(0)' : ''}`;
  return {
    apiVersion: 'rollout-operator.grafana.com/v1',
    kind: 'RolloutHealthCheck',
    metadata: { name, namespace },
    spec: {
      selector: { matchLabels: { 'rollout-group': 'ingester' } },
      prometheusURL,
      evaluationInterval: '1s',
      ...options.spec,
      checks: [
        {
          name: 'error-ratio',
          query,
          successQuery: `\${current} <= bool (\${baseline} + ${options.slack ?? ERROR_RATIO_SLACK})`,
          currentRange: '3s',
          baselineRange: '3s',
          queryTimeout: '2s',
          queryRetries: 0,
          ...options.check,
        },
      ],
    },
  };
}
