// Types of bin/node24.mjs, a plain JavaScript file so that any Node loads it.
export declare const NEEDED_MAJOR: number;
export declare function launchPlan(major: number, projectNodeExists: boolean): 'import' | 'project-node' | 'explain';
export declare function explanation(name: string, version: string): string;
export declare function launch(entry: URL, name: string): Promise<void>;
