// What the /debug/pprof tests read from a response: the profile it carries,
// decoded as `go tool pprof` would (gzip, then pprof's protobuf), and the
// status the HTTPS webhook server answers a path with.
import assert from 'node:assert/strict';
import { get as httpsGet } from 'node:https';
import { gunzipSync } from 'node:zlib';
import { Profile } from 'pprof-format';

/** The profile a response carries, decoded: gzip, then pprof's protobuf. */
export async function decoded(response: Response): Promise<{ profile: Profile; raw: Buffer }> {
  assert.equal(response.status, 200, await response.clone().text());
  assert.equal(response.headers.get('content-type'), 'application/octet-stream');
  const raw = Buffer.from(await response.arrayBuffer());
  return { profile: Profile.decode(gunzipSync(raw)), raw };
}

export function sampleTypes(profile: Profile): string[] {
  const strings = profile.stringTable.strings;
  return profile.sampleType.map((t) => `${strings[Number(t.type)]}/${strings[Number(t.unit)]}`);
}

export function functionNames(profile: Profile): Set<string> {
  return new Set(profile.function.map((f) => profile.stringTable.strings[Number(f.name)]!));
}

/** The status a GET over HTTPS gets from the test webhook server (its certificate is self-signed). */
export async function httpsStatus(port: number, path: string): Promise<number | undefined> {
  return new Promise((resolve, reject) => {
    const request = httpsGet({ host: '127.0.0.1', port, path, rejectUnauthorized: false }, (response) => {
      response.resume();
      resolve(response.statusCode);
    });
    request.on('error', reject);
  });
}
