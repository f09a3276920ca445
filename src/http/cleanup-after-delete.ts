/**
 * Clean-up after a deletion is recorded: a failure of it is logged and left to whatever finishes it later (the cron
 * safety net, a lease), never answered as the request's failure, since a retry would find nothing to delete.
 */
export async function cleanUpAfterDelete(
	subject: { kind: string; idField: string; id: string },
	what: string,
	work: () => Promise<unknown>,
): Promise<void> {
	try {
		await work();
	} catch (error) {
		console.error(
			JSON.stringify({
				level: "error",
				msg: `${subject.kind} deleted, but ${what}`,
				[subject.idField]: subject.id,
				error: error instanceof Error ? error.message : String(error),
			}),
		);
	}
}
