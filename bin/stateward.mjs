#!/usr/bin/env node
// The `stateward` bin: runs bin/stateward.ts on Node 24 (bin/node24.mjs says why this file is JavaScript).
import { launch } from './node24.mjs';

await launch(new URL('./stateward.ts', import.meta.url), 'stateward');
