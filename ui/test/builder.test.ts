import { describe, expect, it } from 'vitest';
import { emptyState, name, operatorsFor, splitList, toBql, where, type BuilderState } from '../src/builder';
import { nestedFilter } from './fixtures';

describe('the builder writes BQL', () => {
  it('starts with every field of the stream', () => {
    expect(toBql(emptyState())).toBe('SELECT *\nFROM STREAM(30000, TIME)\nLIMIT 10');
  });

  it('nests AND/OR groups with parentheses and type-aware literals', () => {
    const s = emptyState();
    s.filter = nestedFilter();
    const types = { latency: 'NUMBER', country: 'STRING', device: 'STRING' } as const;
    expect(where(s.filter, types)).toBe(
      "device RLIKE 'iph.*' AND (latency > 100 OR country IN ('us', 'fr, be', 'it''s')) AND CONTAINSKEY(tags, 'k') AND SIZEOF(items) > 2 AND ok = TRUE",
    );
  });

  it('drops empty conditions and groups', () => {
    const g = { kind: 'group', join: 'OR', items: [{ kind: 'group', join: 'AND', items: [] }, { kind: 'cond', field: '', op: '=', value: '' }] } as const;
    expect(where(JSON.parse(JSON.stringify(g)))).toBe('');
  });

  it('writes GROUP BY with metrics, a tumbling window and renamed raw fields', () => {
    const s: BuilderState = {
      ...emptyState(),
      output: { kind: 'groupBy', groups: ['device'], metrics: [{ fn: 'COUNT', as: 'n' }, { fn: 'AVG', field: 'latency' }] },
      window: { kind: 'tumbling', ms: 2000 },
      limit: 0,
    };
    expect(toBql(s)).toBe('SELECT device, COUNT(*) AS n, AVG(latency)\nFROM STREAM(30000, TIME)\nGROUP BY device\nWINDOWING TUMBLING(2000, TIME)');
    const r: BuilderState = { ...emptyState(), output: { kind: 'raw', fields: [{ field: 'user.id', as: 'who' }, { field: 'from' }] } };
    expect(toBql(r)).toBe('SELECT user.id AS who, "from"\nFROM STREAM(30000, TIME)\nLIMIT 10');
  });

  it('writes COUNT DISTINCT, distributions and TOP K without LIMIT', () => {
    const base = { ...emptyState(), window: { kind: 'additive', ms: 1000 } } as BuilderState;
    expect(toBql({ ...base, output: { kind: 'countDistinct', fields: ['user'], as: 'users' } })).toBe(
      'SELECT COUNT(DISTINCT user) AS users\nFROM STREAM(30000, TIME)\nWINDOWING EVERY(1000, TIME, ALL)',
    );
    expect(toBql({ ...base, window: { kind: 'none' }, output: { kind: 'distribution', type: 'QUANTILE', field: 'latency', points: { mode: 'LINEAR', n: 11 } } })).toBe(
      'SELECT QUANTILE(latency, LINEAR, 11)\nFROM STREAM(30000, TIME)',
    );
    expect(toBql({ ...base, window: { kind: 'none' }, output: { kind: 'distribution', type: 'FREQ', field: 'x', points: { mode: 'REGION', start: 0, end: 100, step: 10 } } })).toContain(
      'FREQ(x, REGION, 0, 100, 10)',
    );
    expect(toBql({ ...base, window: { kind: 'none' }, output: { kind: 'distribution', type: 'CUMFREQ', field: 'x', points: { mode: 'MANUAL', values: [1, 5, 9] } } })).toContain(
      'CUMFREQ(x, MANUAL, 1, 5, 9)',
    );
    expect(toBql({ ...base, window: { kind: 'none' }, output: { kind: 'topK', k: 5, threshold: 3, fields: ['page', 'device'], as: 'views' } })).toBe(
      'SELECT TOP(5, 3, page, device) AS views\nFROM STREAM(30000, TIME)',
    );
  });

  it('writes sliding windows by record and the look-back sources', () => {
    const s: BuilderState = { ...emptyState(), window: { kind: 'sliding', records: 1 }, source: { kind: 'since', from: '-15m' } };
    expect(toBql(s)).toBe("SELECT *\nFROM STREAM(30000, TIME) SINCE '-15m'\nWINDOWING EVERY(1, RECORD, FIRST, 1, RECORD)\nLIMIT 10");
    const h: BuilderState = { ...emptyState(), source: { kind: 'history', from: '-1h' } };
    expect(toBql(h)).toBe("SELECT *\nFROM HISTORY('-1h')\nLIMIT 10");
    const c: BuilderState = { ...emptyState(), source: { kind: 'history', from: '1600000000000', to: '2026-01-01' } };
    expect(toBql(c)).toContain("FROM HISTORY(1600000000000, '2026-01-01')");
  });

  it('quotes names that are not plain and offers operators by type', () => {
    expect(name('a.b')).toBe('a.b');
    expect(name('my field')).toBe('"my field"');
    expect(name('count')).toBe('count');
    expect(name('select')).toBe('"select"');
    expect(operatorsFor('MAP')).toContain('CONTAINSKEY');
    expect(operatorsFor('NUMBER')).toContain('BETWEEN');
    expect(operatorsFor('STRING')).toContain('RLIKE');
    expect(splitList("a, 'b, c'")).toEqual(['a', 'b, c']);
  });
});
