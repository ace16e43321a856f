// What the package's bins run first, in plain JavaScript that any Node
// loads: Stateward is TypeScript run by Node 24's type stripping, and an
// older Node (a distribution's, or the one `npx` finds first on PATH) fails
// on a .ts file before a line of ours runs, with ERR_UNKNOWN_FILE_EXTENSION
// and a stack trace. Here an older Node hands the command to the Node 24 an
// `npm ci` of the project brings (node_modules/node), or says in one line
// what to do.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The Node major version the sources need. */
export const NEEDED_MAJOR = 24;

/** What to do on a Node of `major`: run here, run with the project's Node 24, or explain. */
export function launchPlan(major, projectNodeExists) {
  if (major >= NEEDED_MAJOR) return 'import';
  return projectNodeExists ? 'project-node' : 'explain';
}

/** The one line an older Node without the project's own gets. */
export function explanation(name, version) {
  return `${name} needs Node.js ${NEEDED_MAJOR} or later, and this is Node ${version}: install Node ${NEEDED_MAJOR}, or in a clone of Stateward run \`npm ci\` and then \`npx ${name} …\` (npm ci brings Node ${NEEDED_MAJOR}).\n`;
}

/** Runs the TypeScript entry `entry` (a URL) as the bin `name`. */
export async function launch(entry, name) {
  const projectNode = fileURLToPath(new URL('../node_modules/node/bin/node', import.meta.url));
  const plan = launchPlan(Number.parseInt(process.versions.node, 10), existsSync(projectNode));
  if (plan === 'import') {
    try {
      await import(entry.href);
    } catch (error) {
      // Node does not strip types under node_modules (an install from a packed tarball).
      if (error?.code !== 'ERR_UNSUPPORTED_NODE_MODULES_TYPE_STRIPPING') throw error;
      process.stderr.write(
        `${name}: Node runs TypeScript only outside node_modules; install Stateward from a clone (npm install -g <path of the clone>) or run it there with npx.\n`,
      );
      process.exitCode = 1;
    }
    return;
  }
  if (plan === 'explain') {
    process.stderr.write(explanation(name, process.version));
    process.exitCode = 1;
    return;
  }
  const run = spawnSync(projectNode, [fileURLToPath(entry), ...process.argv.slice(2)], { stdio: 'inherit' });
  if (run.error) {
    process.stderr.write(`${name}: cannot start ${projectNode}: ${run.error.message}\n`);
    process.exitCode = 1;
  } else if (run.signal) process.kill(process.pid, run.signal);
  else process.exitCode = run.status ?? 1;
}
