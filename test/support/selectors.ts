// Label selectors back to text, for tests that build selector strings or
// check that parseLabelSelector reads what they write.
import type { LabelSelector } from '../../src/vocabulary/selectors.ts';

/** The selector as a string parseLabelSelector reads back to the same requirements. */
export function formatLabelSelector(selector: LabelSelector): string {
  return selector.requirements
    .map((r) => {
      switch (r.operator) {
        case 'Exists':
          return r.key;
        case 'DoesNotExist':
          return `!${r.key}`;
        case 'Equals':
          return `${r.key}=${r.values[0] ?? ''}`;
        case 'NotEquals':
          return `${r.key}!=${r.values[0] ?? ''}`;
        case 'In':
          return `${r.key} in (${r.values.join(',')})`;
        case 'NotIn':
          return `${r.key} notin (${r.values.join(',')})`;
      }
    })
    .join(',');
}
