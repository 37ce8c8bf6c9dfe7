import { describe, expect, it } from 'vitest';
import { windowAxis, windowLabels, windowRange, windowSteps } from '../src/results';
import type { Emission } from '../src/api';

/** An emission of window `number` with the given window metadata. */
function win(number: number, window: Record<string, unknown>): Emission {
  return { records: [{ n: number }], meta: { Window: { Number: number, ...window } } };
}

/** Seconds since the epoch of a local time of day on 1 March 2026. */
const at = (h: number, m: number, s: number, ms = 0) => new Date(2026, 2, 1, h, m, s, ms).getTime() / 1000;

describe('the x axis of a windowed chart', () => {
  it('puts time windows at their time and labels them with the time of day', () => {
    const emissions = [1, 2, 3].map((n) => win(n, { Name: 'Tumbling', 'Emit Time': at(12, 0, 5 * n) * 1000 }));
    const axis = windowAxis(emissions);
    expect(axis).toEqual({ x: [at(12, 0, 5), at(12, 0, 10), at(12, 0, 15)], time: true });
    expect(windowLabels([at(12, 0, 5), at(12, 0, 10), at(12, 0, 15)], true)).toEqual(['12:00:05', '12:00:10', '12:00:15']);
  });

  it('labels whole minutes as hours and minutes, and steps under a second in tenths', () => {
    expect(windowLabels([at(9, 58, 0), at(9, 59, 0), at(10, 0, 0)], true)).toEqual(['09:58', '09:59', '10:00']);
    expect(windowLabels([at(9, 58, 30), at(9, 59, 30)], true)).toEqual(['09:58:30', '09:59:30']);
    expect(windowLabels([at(23, 59, 59, 500), at(23, 59, 59, 700)], true)).toEqual(['23:59:59.5', '23:59:59.7']);
  });

  it('puts windows over history at the start of their bucket of record time', () => {
    const emissions = [0, 1].map((i) => win(i + 1, { Name: 'Tumbling', 'Emit Time': at(15, 0, 0) * 1000, Start: at(8, i, 0) * 1000, End: at(8, i + 1, 0) * 1000 }));
    expect(windowAxis(emissions)).toEqual({ x: [at(8, 0, 0), at(8, 1, 0)], time: true });
  });

  it('numbers windows of records, and labels only whole numbers: never 1, 1.1, 1.2', () => {
    const emissions = [4, 5, 6].map((n) => win(n, { Name: 'Sliding', 'Emit Time': at(12, 0, n) * 1000 }));
    expect(windowAxis(emissions)).toEqual({ x: [4, 5, 6], time: false });
    expect(windowLabels([1, 1.1, 1.2, 1.5, 2], false)).toEqual(['1', '', '', '', '2']);
    expect(windowLabels([10, 20, 30], false)).toEqual(['10', '20', '30']);
  });

  it('numbers emissions without window metadata in their order', () => {
    expect(windowAxis([{ records: [], meta: {} }, { records: [], meta: {} }])).toEqual({ x: [1, 2], time: false });
  });

  it('ticks no closer than the windows themselves', () => {
    const seconds = [at(12, 0, 1), at(12, 0, 2), at(12, 0, 3)];
    expect(windowSteps(seconds, true)[0]).toBe(1);
    expect(windowSteps([at(12, 0, 0), at(12, 1, 0)], true)[0]).toBe(60);
    expect(windowSteps([at(12, 0, 0)], true)[0]).toBe(1);
    expect(windowSteps([0.5, 1, 1.5].map((s) => at(12, 0, 0) + s), true)[0]).toBe(0.5);
    expect(windowSteps([1, 2, 3], false)[0]).toBe(1);
    expect(windowSteps([10, 20, 30], false)[0]).toBe(10);
  });

  it('leaves half a window of room on each side, so the first and last windows are ticked', () => {
    expect(windowRange([4, 5, 6], false, 4, 6)).toEqual([3.5, 6.5]);
    const t = at(12, 0, 10);
    expect(windowRange([t, t + 1, t + 2], true, t, t + 2)).toEqual([t - 0.5, t + 2.5]);
  });
});
