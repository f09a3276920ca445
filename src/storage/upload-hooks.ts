/**
 * What happens around a signed PUT, by object-key prefix. A hook may refuse an upload before any byte is
 * stored (`beforePut`, e.g. a second upload of the same audio file, or one through a superseded address) and
 * reacts once the object is in R2 (`afterPut`, e.g. mark the file uploaded and start preprocessing).
 */
import type { StorageGrant } from "./signed-url.ts";

export interface UploadHook {
	prefix: string;
	beforePut?(env: Env, grant: StorageGrant): Promise<void>;
	afterPut?(env: Env, grant: StorageGrant, object: R2Object): Promise<void>;
}

const hooks: UploadHook[] = [];

export function registerUploadHook(hook: UploadHook): void {
	hooks.push(hook);
}

export const uploadHookFor = (key: string) => hooks.find((h) => key.startsWith(h.prefix));
