// Builder states shared by the tests of writing BQL and of reading it back.
import type { Group } from '../src/builder';

/** Conditions of several operators in nested AND/OR groups, with quotes and commas in values. */
export function nestedFilter(): Group {
  return {
    kind: 'group',
    join: 'AND',
    items: [
      { kind: 'cond', field: 'device', op: 'RLIKE', value: 'iph.*' },
      {
        kind: 'group',
        join: 'OR',
        items: [
          { kind: 'cond', field: 'latency', op: '>', value: '100' },
          { kind: 'cond', field: 'country', op: 'IN', value: "us, 'fr, be', it's" },
        ],
      },
      { kind: 'cond', field: 'tags', op: 'CONTAINSKEY', value: 'k' },
      { kind: 'cond', field: 'items', op: 'SIZEOF >', value: '2' },
      { kind: 'cond', field: 'ok', op: 'IS TRUE', value: '' },
    ],
  };
}
