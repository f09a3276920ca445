/**
 * Preloaded by `npm start` and the bench (`node --import ./src/resolve-fallback.ts`). The shared contracts
 * live outside this package (`../src/contracts`) and import `zod`; inside the root npm workspace that resolves
 * from the root `node_modules`, but when this package is installed on its own it does not. Only when the
 * normal resolution fails, retry from this package's folder. In the workspace this hook never changes anything.
 */
import { registerHooks } from "node:module";

registerHooks({
	resolve(specifier, context, nextResolve) {
		try {
			return nextResolve(specifier, context);
		} catch (error) {
			const bare = !specifier.startsWith(".") && !specifier.startsWith("/") && !specifier.includes(":");
			if (!bare || (error as { code?: string }).code !== "ERR_MODULE_NOT_FOUND") throw error;
			return nextResolve(specifier, { ...context, parentURL: import.meta.url });
		}
	},
});
