import { describe, expect, it } from 'vitest';
import { ago, bytes } from '../src/cluster';

describe('the cluster page', () => {
  it('says how long ago a node was heard from', () => {
    expect(ago(10_000, 12_400)).toBe('2 s ago');
    expect(ago(0, 150_000)).toBe('3 min ago');
    expect(ago(0, 7_300_000)).toBe('2 h ago');
    expect(ago(5_000, 4_000)).toBe('0 s ago');
  });
  it('writes sizes in decimal units', () => {
    expect(bytes(12)).toBe('12 B');
    expect(bytes(179_392)).toBe('179.4 KB');
    expect(bytes(2_500_000_000)).toBe('2.5 GB');
  });
});
