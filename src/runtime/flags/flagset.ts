// A command-line parser with the semantics of Go's `flag` package. Stateward
// replaces the Go rollout-operator in existing deployments, so every command
// line those deployments pass must mean the same thing here, and every
// mistake must fail with the message Go would print:
//
//   -name / --name, -name=value, -name value (not for booleans), -bool alone;
//   parsing stops at the first non-flag, at a lone `-`, and after `--`;
//   the last occurrence of a flag wins; -h / -help ask for help.
//
// Two additions: an optional environment-variable fallback per flag
// (command line > environment > default), and enum strings validated at
// parse time.
//
// parse() returns a result instead of throwing for anything the *user* got
// wrong; mistakes in the flag definitions themselves throw immediately.

import { Buffer } from 'node:buffer';
import { quoteCut, quoteGo } from '../go/strconv.ts';
import {
  boolKind,
  durationKind,
  enumKind,
  floatKind,
  intKind,
  promDurationKind,
  stringKind,
  stringListKind,
} from './kinds.ts';
import type { ValueKind } from './kinds.ts';
import { compareCodeUnits } from '../order.ts';

/** Where a flag's current value came from. */
export type FlagSource = 'default' | 'command-line' | 'env';

/** A defined flag; `value` is meaningful after FlagSet.parse. */
export interface Flag<T> {
  readonly name: string;
  readonly usage: string;
  readonly defaultValue: T;
  /** Environment variable consulted when the flag is absent from the command line. */
  readonly env: string | undefined;
  readonly value: T;
  readonly source: FlagSource;
}

export interface FlagOptions {
  /** Environment variable to fall back on when the flag is not on the command line. */
  env?: string;
}

/**
 * How a flag's text becomes a value, for flags of a type the FlagSet does not
 * know (Go's flag.Value). parse throws an Error whose message is shown after
 * `invalid value "..." for flag -name: `.
 */
export interface FlagCodec<T> {
  /** Parses one occurrence; `current` is the value so far, for types that accumulate. */
  parse(text: string, current: T): T;
  /** Text shown as the default in help (Go's Value.String). */
  format(value: T): string;
  /** format() of the type's zero value: a default equal to it is not shown in help. */
  readonly zeroText?: string;
  /** Name of the value shown in help after the flag; Go shows `value` for custom types. */
  readonly typeName?: string;
}

export type ParseResult =
  /** `args` are the positional arguments left after the flags. */
  | { readonly kind: 'ok'; readonly args: string[] }
  /** -h, -help or --help was given (and is not a defined flag): print `usage`, exit 0. */
  | { readonly kind: 'help'; readonly usage: string }
  /** The command line is invalid: print `message` then `usage`, exit 2 (as Go does). */
  | { readonly kind: 'error'; readonly message: string; readonly usage: string };

export type Environment = Readonly<Record<string, string | undefined>>;

/** The type-erased face of a flag that parsing and help need. */
interface FlagEntry {
  readonly name: string;
  readonly usage: string;
  readonly env: string | undefined;
  readonly kind: Pick<ValueKind<unknown>, 'typeName' | 'isBool' | 'quoteDefault' | 'zeroText'>;
  readonly source: FlagSource;
  defaultText(): string;
  set(text: string, source: FlagSource): void;
}

class DefinedFlag<T> implements Flag<T>, FlagEntry {
  readonly name: string;
  readonly usage: string;
  readonly defaultValue: T;
  readonly env: string | undefined;
  readonly kind: ValueKind<T>;
  value: T;
  source: FlagSource = 'default';

  constructor(name: string, usage: string, defaultValue: T, kind: ValueKind<T>, env: string | undefined) {
    this.name = name;
    this.usage = usage;
    this.defaultValue = defaultValue;
    this.value = defaultValue;
    this.kind = kind;
    this.env = env;
  }

  defaultText(): string {
    return this.kind.format(this.defaultValue);
  }

  set(text: string, source: FlagSource): void {
    this.value = this.kind.parse(text, this.value);
    this.source = source;
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Go's UnquoteUsage: the first back-quoted word of the usage names the
 * flag's value in help (and loses its quotes); otherwise the type does.
 */
function unquoteUsage(flag: FlagEntry): { valueName: string; usage: string } {
  const open = flag.usage.indexOf('`');
  if (open >= 0) {
    const close = flag.usage.indexOf('`', open + 1);
    if (close >= 0) {
      const valueName = flag.usage.slice(open + 1, close);
      return { valueName, usage: flag.usage.slice(0, open) + valueName + flag.usage.slice(close + 1) };
    }
  }
  return { valueName: flag.kind.typeName, usage: flag.usage };
}

function helpEntry(flag: FlagEntry): string {
  const { valueName, usage } = unquoteUsage(flag);
  let line = `  -${flag.name}`;
  if (valueName !== '') line += ` ${valueName}`;
  // Go keeps one-letter booleans on one line; everything else gets its own.
  line += Buffer.byteLength(line) <= 4 ? '\t' : '\n    \t';
  line += usage.replaceAll('\n', '\n    \t');
  const defaultText = flag.defaultText();
  if (defaultText !== flag.kind.zeroText) {
    line += ` (default ${flag.kind.quoteDefault ? quoteGo(defaultText) : defaultText})`;
  }
  if (flag.env !== undefined) line += ` (env ${flag.env})`;
  return line + '\n';
}

export class FlagSet {
  readonly name: string;
  private readonly flags = new Map<string, FlagEntry>();
  private parsed = false;

  /** `name` appears in the help header, as in Go's flag.NewFlagSet. */
  constructor(name: string) {
    this.name = name;
  }

  bool(name: string, defaultValue: boolean, usage: string, options: FlagOptions = {}): Flag<boolean> {
    return this.define(name, defaultValue, usage, boolKind, options);
  }

  /** An integer in Go's syntax (`8001`, `0x1f`, `1_000`; a leading 0 means octal). */
  int(name: string, defaultValue: number, usage: string, options: FlagOptions = {}): Flag<number> {
    if (!Number.isSafeInteger(defaultValue))
      throw new Error(`flag ${name}: default ${defaultValue} is not a safe integer`);
    return this.define(name, defaultValue, usage, intKind, options);
  }

  float(name: string, defaultValue: number, usage: string, options: FlagOptions = {}): Flag<number> {
    return this.define(name, defaultValue, usage, floatKind, options);
  }

  string(name: string, defaultValue: string, usage: string, options: FlagOptions = {}): Flag<string> {
    return this.define(name, defaultValue, usage, stringKind, options);
  }

  /** A string restricted to `allowed`, checked when parsing. */
  enumString<const V extends string>(
    name: string,
    defaultValue: NoInfer<V>,
    allowed: readonly V[],
    usage: string,
    options: FlagOptions = {},
  ): Flag<V> {
    if (!allowed.includes(defaultValue)) {
      throw new Error(`flag ${name}: default ${quoteGo(defaultValue)} is not one of ${allowed.join(', ')}`);
    }
    return this.define(name, defaultValue, usage, enumKind(allowed), options);
  }

  /** A Go duration (`300ms`, `1h30m`); the value is in milliseconds. */
  duration(name: string, defaultMillis: number, usage: string, options: FlagOptions = {}): Flag<number> {
    if (!Number.isFinite(defaultMillis)) throw new Error(`flag ${name}: default duration must be finite`);
    return this.define(name, defaultMillis, usage, durationKind, options);
  }

  /** A Prometheus duration (`1y`, `2w`, `1d12h`); the value is in milliseconds. */
  promDuration(name: string, defaultMillis: number, usage: string, options: FlagOptions = {}): Flag<number> {
    if (!Number.isFinite(defaultMillis)) throw new Error(`flag ${name}: default duration must be finite`);
    return this.define(name, defaultMillis, usage, promDurationKind, options);
  }

  /** A comma-separated list, with dskit's StringSliceCSV semantics. */
  stringList(
    name: string,
    defaultValue: readonly string[],
    usage: string,
    options: FlagOptions = {},
  ): Flag<readonly string[]> {
    return this.define(name, [...defaultValue], usage, stringListKind, options);
  }

  /** A flag of any other type (Go's FlagSet.Var). */
  value<T>(name: string, defaultValue: T, usage: string, codec: FlagCodec<T>, options: FlagOptions = {}): Flag<T> {
    const kind: ValueKind<T> = {
      parse: (text, current) => codec.parse(text, current),
      format: (value) => codec.format(value),
      zeroText: codec.zeroText ?? '',
      typeName: codec.typeName ?? 'value',
      isBool: false,
      quoteDefault: false,
    };
    return this.define(name, defaultValue, usage, kind, options);
  }

  /** Whether the flag was given on the command line or through its environment variable. */
  isSet(name: string): boolean {
    return this.lookup(name).source !== 'default';
  }

  /** Go's default usage text: a header, then every flag sorted by name. */
  usage(): string {
    const header = this.name === '' ? 'Usage:\n' : `Usage of ${this.name}:\n`;
    const sorted = [...this.flags.values()].sort((a, b) => compareCodeUnits(a.name, b.name));
    return header + sorted.map(helpEntry).join('');
  }

  /**
   * Parses `argv` (without the program name), then fills flags absent from
   * it from `env`. Call once, after defining every flag. An environment
   * variable set to the empty string counts as unset.
   */
  parse(argv: readonly string[], env: Environment): ParseResult {
    if (this.parsed) throw new Error(`flag set ${this.name} parsed twice`);
    this.parsed = true;
    const fromCommandLine = this.parseCommandLine(argv);
    if (fromCommandLine.kind !== 'ok') return fromCommandLine;
    const envError = this.applyEnvironment(env);
    return envError === undefined ? fromCommandLine : this.error(envError);
  }

  private parseCommandLine(argv: readonly string[]): ParseResult {
    let next = 0;
    while (next < argv.length) {
      const arg = argv[next]!;
      if (arg.length < 2 || arg[0] !== '-') break;
      let dashes = 1;
      if (arg[1] === '-') {
        dashes = 2;
        if (arg.length === 2) {
          next++; // `--` ends the flags and is not itself an argument
          break;
        }
      }
      let name = arg.slice(dashes);
      if (name === '' || name[0] === '-' || name[0] === '=') return this.error(`bad flag syntax: ${arg}`);
      next++;

      let value: string | undefined;
      const equals = name.indexOf('=');
      if (equals > 0) {
        value = name.slice(equals + 1);
        name = name.slice(0, equals);
      }

      const flag = this.flags.get(name);
      if (flag === undefined) {
        if (name === 'help' || name === 'h') return { kind: 'help', usage: this.usage() };
        return this.error(`flag provided but not defined: -${name}`);
      }

      if (flag.kind.isBool) {
        // A boolean never takes the next argument: `-b false` leaves `false`
        // as the first positional argument, exactly as in Go.
        const text = value ?? 'true';
        try {
          flag.set(text, 'command-line');
        } catch (error) {
          return this.error(`invalid boolean value ${quoteCut(text)} for -${name}: ${messageOf(error)}`);
        }
        continue;
      }
      if (value === undefined) {
        if (next >= argv.length) return this.error(`flag needs an argument: -${name}`);
        value = argv[next++]!;
      }
      try {
        flag.set(value, 'command-line');
      } catch (error) {
        return this.error(`invalid value ${quoteCut(value)} for flag -${name}: ${messageOf(error)}`);
      }
    }
    return { kind: 'ok', args: argv.slice(next) };
  }

  /** Returns the first error, in flag-name order, or undefined. */
  private applyEnvironment(env: Environment): string | undefined {
    const sorted = [...this.flags.values()].sort((a, b) => compareCodeUnits(a.name, b.name));
    for (const flag of sorted) {
      if (flag.env === undefined || flag.source !== 'default') continue;
      const text = env[flag.env];
      if (text === undefined || text === '') continue;
      try {
        flag.set(text, 'env');
      } catch (error) {
        return `invalid value ${quoteCut(text)} for environment variable ${flag.env} (flag -${flag.name}): ${messageOf(error)}`;
      }
    }
    return undefined;
  }

  private error(message: string): ParseResult {
    return { kind: 'error', message, usage: this.usage() };
  }

  private lookup(name: string): FlagEntry {
    const flag = this.flags.get(name);
    if (flag === undefined) throw new Error(`flag set ${this.name} has no flag ${name}`);
    return flag;
  }

  private define<T>(name: string, defaultValue: T, usage: string, kind: ValueKind<T>, options: FlagOptions): Flag<T> {
    if (this.parsed) throw new Error(`flag ${name} defined after flag set ${this.name} was parsed`);
    // Go's rules: such names could never be written on a command line.
    if (name === '') throw new Error('flag name is empty');
    if (name.startsWith('-')) throw new Error(`flag ${quoteGo(name)} begins with -`);
    if (name.includes('=')) throw new Error(`flag ${quoteGo(name)} contains =`);
    if (this.flags.has(name)) throw new Error(`${this.name} flag redefined: ${name}`);
    if (options.env === '') throw new Error(`flag ${name}: environment variable name is empty`);
    const flag = new DefinedFlag(name, usage, defaultValue, kind, options.env);
    this.flags.set(name, flag);
    return flag;
  }
}
