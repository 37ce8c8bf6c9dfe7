import { describe, expect, it } from 'vitest';
import { emptyState, toBql, type BuilderState } from '../src/builder';
import { fromBql, NotForBuilder } from '../src/builderParse';
import { nestedFilter } from './fixtures';

/** Builder states of every kind of output, window, source and condition. */
function states(): BuilderState[] {
  const out: BuilderState[] = [];
  const s = (f: (s: BuilderState) => void) => {
    const x = emptyState();
    f(x);
    out.push(x);
  };
  s(() => {});
  s((x) => {
    x.output = { kind: 'raw', fields: [{ field: 'id' }, { field: 'page.url', as: 'url' }, { field: 'select', as: 'odd name' }] };
    x.filter = nestedFilter();
    x.filter.items.push(
      { kind: 'group', join: 'OR', items: [{ kind: 'cond', field: 'a', op: 'IS NULL', value: '' }, { kind: 'cond', field: 'b', op: 'NOT RLIKE', value: 'x' }] },
      { kind: 'cond', field: 'tags', op: 'CONTAINSVALUE', value: '3' },
      { kind: 'cond', field: 'gone', op: 'IS NOT NULL', value: '' },
      { kind: 'cond', field: 't', op: 'BETWEEN', value: '1, 2.5' },
      { kind: 'cond', field: 'n', op: 'NOT IN', value: '1, 2', numeric: true },
      { kind: 'cond', field: 'latency', op: '<=', value: '7', numeric: true },
    );
    x.limit = 25;
    x.window = { kind: 'sliding', records: 3 };
  });
  s((x) => {
    x.output = { kind: 'groupBy', groups: ['device', 'country'], metrics: [{ fn: 'COUNT', as: 'n' }, { fn: 'AVG', field: 'timespent', as: 'mean' }, { fn: 'MAX', field: 'timespent' }] };
    x.window = { kind: 'tumbling', ms: 2000 };
    x.limit = undefined;
    x.source = { kind: 'since', from: '-15m' };
  });
  s((x) => {
    x.output = { kind: 'groupBy', groups: [], metrics: [{ fn: 'SUM', field: 'bytes', as: 'total' }] };
    x.window = { kind: 'additive', ms: 500 };
    x.source = { kind: 'history', from: '-1h', to: '2026-11-24T10:00:00Z' };
  });
  s((x) => {
    x.output = { kind: 'countDistinct', fields: ['session_id', 'user'], as: 'sessions' };
    x.durationMs = 0;
  });
  s((x) => (x.output = { kind: 'distribution', type: 'QUANTILE', field: 'latency', points: { mode: 'LINEAR', n: 11 } }));
  s((x) => (x.output = { kind: 'distribution', type: 'FREQ', field: 'latency', points: { mode: 'REGION', start: 0, end: 100, step: 10 } }));
  s((x) => (x.output = { kind: 'distribution', type: 'CUMFREQ', field: 'latency', points: { mode: 'MANUAL', values: [1, 5, 50] } }));
  s((x) => (x.output = { kind: 'topK', k: 5, threshold: 10, fields: ['page_url', 'device'], as: 'hits' }));
  s((x) => {
    x.output = { kind: 'topK', k: 3, fields: ['page_url'] };
    x.source = { kind: 'history', from: '1700000000000' };
  });
  return out;
}

describe('a query the builder wrote reads back into the builder', () => {
  it('gives back the same query for every kind of output, window, source and condition', () => {
    for (const s of states()) {
      const bql = toBql(s);
      expect(toBql(fromBql(bql)), bql).toBe(bql);
    }
  });

  it('reads queries written by hand in the same shapes', () => {
    const s = fromBql("select device, count(*) from stream(5000, time) where a = 1 and b = 'x' or c <> 2 group by device");
    expect(s.output).toEqual({ kind: 'groupBy', groups: ['device'], metrics: [{ fn: 'COUNT' }] });
    expect(s.durationMs).toBe(5000);
    expect(s.filter.join).toBe('OR');
    expect(s.filter.items[0]).toMatchObject({ kind: 'group', join: 'AND' });
    expect(s.filter.items[1]).toEqual({ kind: 'cond', field: 'c', op: '!=', value: '2', numeric: true });
    // a number stays a number, a quoted one a string, whatever the schema says
    expect(toBql(fromBql("SELECT * FROM STREAM(1000, TIME) WHERE a = 1 AND b = '1' AND c = 'true'"), { a: 'STRING', b: 'NUMBER' })).toBe(
      "SELECT *\nFROM STREAM(1000, TIME)\nWHERE a = 1 AND b = '1' AND c = 'true'",
    );
  });

  it('says what it has no form for', () => {
    for (const [query, why] of [
      ['SELECT a + 1 FROM STREAM(1000, TIME)', "'+'"],
      ['SELECT * FROM STREAM(1000, TIME) WHERE a > b', 'expected a value'],
      ['SELECT * FROM STREAM(1000, TIME) ORDER BY a', 'no form'],
      ['SELECT a, COUNT(*) FROM STREAM(1000, TIME) GROUP BY b', 'other than'],
      ['SELECT * FROM STREAM(1000, TIME) WINDOWING EVERY(5, RECORD, FIRST, 2, RECORD)', 'no form'],
      ["SELECT * FROM STREAM(1000, TIME) WHERE a = 'x", 'unclosed'],
    ]) {
      expect(() => fromBql(query), query).toThrow(NotForBuilder);
      expect(() => fromBql(query), query).toThrow(why);
    }
  });
});
