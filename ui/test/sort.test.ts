import { describe, expect, it } from 'vitest';
import { sortOrder } from '../src/results';

/** The order a plain comparison of texts gives (what the table promises), for checking. */
function reference(values: (string | null)[], desc: boolean): number[] {
  const order = values.map((_, i) => i);
  return order.sort((a, b) => {
    const x = values[a];
    const y = values[b];
    if (x === y) return 0;
    if (x === null) return 1;
    if (y === null) return -1;
    return (x < y ? -1 : 1) * (desc ? -1 : 1);
  });
}

describe('the table sorts a column', () => {
  it('puts text in code-unit order, missing values last, equal ones in their order', () => {
    const values = ['b', null, 'a', 'c', 'a', undefined, 'B'];
    expect(sortOrder(values, false)).toEqual([6, 2, 4, 0, 3, 1, 5]);
    expect(sortOrder(values, true)).toEqual([3, 0, 2, 4, 6, 1, 5]);
  });

  it('orders text as a comparison of every pair would, both ways', () => {
    let seed = 7;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
    const alphabet = ['a', 'b', 'Z', 'é', '😀', '0', ' '];
    const values = Array.from({ length: 2000 }, () =>
      next() % 13 === 0 ? null : Array.from({ length: next() % 4 }, () => alphabet[next() % alphabet.length]).join(''),
    );
    for (const desc of [false, true]) expect(sortOrder(values, desc)).toEqual(reference(values, desc));
  });

  it('orders numbers by value, and a mixed column by text with numbers by value', () => {
    expect(sortOrder([10, 9, 100, -1], false)).toEqual([3, 1, 0, 2]);
    expect(sortOrder([10, 9, 100, -1], true)).toEqual([2, 0, 1, 3]);
    expect(sortOrder([10, 'x', 9, null], false)).toEqual([2, 0, 1, 3]);
  });

  it('orders numbers as a comparison of every pair would, equal ones in their order', () => {
    let seed = 11;
    const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
    const pool = [0, -0, 1.5, -2, 1e300, -Infinity, Infinity, 3, 3, 42, -7.25];
    const values = Array.from({ length: 3000 }, () => (next() % 5 === 0 ? pool[next() % pool.length] : (next() % 200) - 100));
    for (const desc of [false, true]) {
      // a stable comparison sort of the row numbers by value (Array.prototype.sort is stable)
      const want = values.map((_, i) => i).sort((a, b) => (values[a] - values[b]) * (desc ? -1 : 1) || 0);
      expect(sortOrder(values, desc)).toEqual(want);
    }
  });
});
