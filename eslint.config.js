// Lint rules beyond what the type checker already enforces: unused code,
// forgotten promises (a floating promise in an operator is a lost error),
// consistent type-only imports for Node's type stripping, and size limits.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'test/cluster/controlplane/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // node:test's describe/it return promises the runner itself tracks.
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          allowForKnownSafeCalls: [
            {
              from: 'package',
              package: 'node:test',
              name: ['describe', 'it', 'test', 'suite', 'before', 'after', 'beforeEach', 'afterEach'],
            },
          ],
        },
      ],
      '@typescript-eslint/consistent-type-imports': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      'no-console': 'off',
    },
  },
  // Size limits the code meets, so it stays readable in pieces: a function a
  // reader can hold at once (blank lines and comments not counted), and a
  // bounded number of paths through it. Tests may run longer scenarios.
  {
    files: ['src/**/*.ts'],
    rules: {
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
      complexity: ['error', { max: 35 }],
    },
  },
  {
    files: ['eslint.config.js'],
    ...tseslint.configs.disableTypeChecked,
  },
  // The package's bins' launchers (bin/*.mjs) are plain JavaScript so that an
  // older Node loads them (bin/node24.mjs): outside the TypeScript program.
  {
    files: ['bin/**/*.mjs'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['bin/**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', URL: 'readonly' } },
  },
  // The status page's script (src/web/assets) runs in the browser as served:
  // outside the TypeScript program, with the browser's globals.
  {
    files: ['src/web/assets/**/*.js'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    files: ['src/web/assets/**/*.js'],
    languageOptions: {
      globals: { document: 'readonly', EventSource: 'readonly', fetch: 'readonly', setTimeout: 'readonly' },
    },
  },
);
