// The flags the stateward executable really has, read from `stateward -help`
// (Go flag package format), and the README's flag table.
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { codeSpans, type Table } from './readme.ts';

const bin = fileURLToPath(new URL('../../bin/stateward.ts', import.meta.url));

export interface HelpFlag {
  name: string;
  /** The value name help shows (`string`, `duration`, `value`, …); '' for booleans. */
  type: string;
  /** The default as help prints it, Go-quoted strings unquoted; undefined when help shows none (the type's zero value). */
  default: string | undefined;
  env: string | undefined;
  usage: string;
}

export interface Help {
  status: number | null;
  text: string;
  flags: Map<string, HelpFlag>;
}

/** Runs `stateward -help` with a clean environment and parses what it prints. */
export function statewardHelp(): Help {
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '' };
  const run = spawnSync(process.execPath, [bin, '-help'], { encoding: 'utf8', env, timeout: 30_000 });
  const text = run.stdout + run.stderr;
  return { status: run.status, text, flags: parseHelp(text) };
}

/** Go's quoting of a plain string is JSON's; anything else is left as printed. */
function unquote(text: string): string {
  if (!text.startsWith('"')) return text;
  return JSON.parse(text) as string;
}

export function parseHelp(text: string): Map<string, HelpFlag> {
  const flags = new Map<string, HelpFlag>();
  let current: { name: string; type: string; usage: string[] } | undefined;
  const finish = () => {
    if (!current) return;
    const usage = current.usage.join(' ');
    // Go appends " (default X)" and Stateward " (env NAME)" after the usage text.
    const m = / \(default ("(?:[^"\\]|\\.)*"|[^()]*?)\)(?: \(env ([A-Z_][A-Z0-9_]*)\))?$/.exec(usage);
    const env = m ? m[2] : / \(env ([A-Z_][A-Z0-9_]*)\)$/.exec(usage)?.[1];
    flags.set(current.name, {
      name: current.name,
      type: current.type,
      default: m ? unquote(m[1]!) : undefined,
      env,
      usage,
    });
    current = undefined;
  };
  for (const line of text.split('\n')) {
    const flag = /^ {2}-(\S+)(?: (\S+))?$/.exec(line);
    if (flag) {
      finish();
      current = { name: flag[1]!, type: flag[2] ?? '', usage: [] };
    } else if (line.startsWith('    \t') && current) {
      current.usage.push(line.slice(5));
    } else {
      finish();
    }
  }
  finish();
  return flags;
}

/** What a flag whose help shows no default defaults to. */
export function zeroDefault(flag: HelpFlag): string | undefined {
  switch (flag.type) {
    case '':
      return 'false';
    case 'string':
      return '';
    case 'int':
    case 'float':
      return '0';
    case 'duration':
      return '0s';
    default:
      return undefined; // a custom type: its zero text is the codec's business
  }
}

export interface FlagRow {
  /** Flag names without the dash, in the order of the cell. */
  flags: string[];
  /** Environment variables the row names, per flag. */
  env: Map<string, string[]>;
  /** Literal defaults per flag; undefined when the row documents none or a special one. */
  defaults: Map<string, string | undefined>;
  /** The default cell is parenthesised: a computed or required value, described in words. */
  special: boolean;
  /** The default cell is empty. */
  empty: boolean;
  line: string;
}

const ENV_NAME = /^[A-Z_][A-Z0-9_]*$/;

/**
 * One README flag row. The flag cell lists one or more `-flags`, each
 * optionally followed by (env `NAME`); the default cell holds one literal
 * per flag, one literal shared by all, a parenthesised description, or
 * nothing.
 */
export function parseFlagRow(row: string[]): FlagRow {
  const [flagCell = '', defaultCell = ''] = row;
  const flags: string[] = [];
  const env = new Map<string, string[]>();
  for (const span of codeSpans(flagCell)) {
    if (span.startsWith('-')) {
      flags.push(span.slice(1));
      env.set(span.slice(1), []);
    } else if (ENV_NAME.test(span) && flags.length > 0) {
      env.get(flags.at(-1)!)!.push(span);
    } else {
      throw new Error(`flag cell ${JSON.stringify(flagCell)}: cannot read ${JSON.stringify(span)}`);
    }
  }
  const trimmed = defaultCell.trim();
  const special = trimmed.startsWith('(');
  const defaults = new Map<string, string | undefined>(flags.map((f) => [f, undefined]));
  if (special) {
    // Words, possibly naming an environment variable: `(required; env `POD_NAMESPACE`)`.
    const named = codeSpans(trimmed).filter((s) => ENV_NAME.test(s));
    if (flags.length === 1) env.get(flags[0]!)!.push(...named);
  } else if (trimmed !== '') {
    const literals = codeSpans(trimmed).map((s) => (s === '""' ? '' : s.replace(/^"(.*)"$/, '$1')));
    if (literals.length === 1) for (const f of flags) defaults.set(f, literals[0]);
    else if (literals.length === flags.length) flags.forEach((f, i) => defaults.set(f, literals[i]));
    else
      throw new Error(
        `default cell ${JSON.stringify(defaultCell)} has ${literals.length} literals for ${flags.length} flags`,
      );
  }
  return { flags, env, defaults, special, empty: trimmed === '', line: `| ${row.join(' | ')} |` };
}

export function flagRows(table: Table): FlagRow[] {
  return table.rows.map(parseFlagRow);
}
