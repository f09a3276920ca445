/** One JSON object per line on stdout: what log collectors expect from a container. Never log URLs or secrets. */
export type LogFields = Record<string, unknown>;

export interface Logger {
	info(message: string, fields?: LogFields): void;
	warn(message: string, fields?: LogFields): void;
	error(message: string, fields?: LogFields): void;
}

function write(level: string, message: string, fields?: LogFields): void {
	const line = { time: new Date().toISOString(), level, message, ...fields };
	process.stdout.write(
		`${JSON.stringify(line, (_key, value) => (value instanceof Error ? describeError(value) : value))}\n`,
	);
}

export function describeError(error: unknown): string {
	if (!(error instanceof Error)) return String(error);
	const cause = error.cause instanceof Error ? ` (cause: ${error.cause.message})` : "";
	return `${error.name}: ${error.message}${cause}`;
}

export const jsonLogger: Logger = {
	info: (message, fields) => write("info", message, fields),
	warn: (message, fields) => write("warn", message, fields),
	error: (message, fields) => write("error", message, fields),
};

export const silentLogger: Logger = { info() {}, warn() {}, error() {} };
