#!/usr/bin/env node
// The `kubectl-stateward` bin (kubectl's plugin): runs bin/kubectl-stateward.ts on Node 24 (see bin/node24.mjs).
import { launch } from './node24.mjs';

await launch(new URL('./kubectl-stateward.ts', import.meta.url), 'kubectl-stateward');
