/** RFC 3339 with microseconds, as metav1.MicroTime serialises (Events, Leases): 2026-11-22T01:02:03.123456Z. */
export function microTime(ms: number): string {
  const whole = Math.floor(ms);
  const micros = Math.round((ms - whole) * 1000);
  const iso = new Date(whole).toISOString(); // ...T01:02:03.123Z
  return `${iso.slice(0, -1)}${String(Math.min(micros, 999)).padStart(3, '0')}Z`;
}
