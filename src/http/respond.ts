/** Success responses in the spec's envelope `{ success: true, data }`. */
export function ok(data: unknown, init: { status?: number; headers?: Record<string, string> } = {}): Response {
	return Response.json({ success: true, data }, { status: init.status ?? 200, headers: init.headers });
}

export const created = (data: unknown) => ok(data, { status: 201 });
